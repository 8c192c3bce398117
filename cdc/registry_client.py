"""Writer schemas by id from the schema registry's Confluent-compatible API (the adapter; I/O only).

`GET <ccompat>/schemas/ids/{id}` returns the schema text Apicurio stored for a content id; an id
always names the same schema, so each is fetched once and kept, in a bounded least-recently-used cache
(`cache_size` ids: a long `cdc tail` over many topics and schema versions stays small).

An unknown id is `SchemaNotFound` (the record's problem: `cdc tail --on-error skip` skips it); a
registry that does not answer, or answers with another error, is `RegistryUnavailable` (nobody's
record can be read: the caller stops). A refused login (HTTP 401/403) or TLS handshake is
`ServiceAccessRefused` naming the SCHEMA_REGISTRY_* settings (`auth`, kafkakit.http_auth).
"""

from __future__ import annotations

from collections import OrderedDict
from types import TracebackType

import httpx

from cdc.avro_records import WriterSchema, writer_schema
from cdc.errors import RegistryUnavailable, SchemaNotFound
from kafkakit.http_auth import NO_REGISTRY_AUTH, HttpAuth, access_problem, httpx_options

DEFAULT_CACHE_SIZE = 512
_CCOMPAT = "/apis/ccompat/"
_SERVICE = "the schema registry"


def ccompat_url(url: str) -> str:
    """The ccompat API under `url`: SCHEMA_REGISTRY_URL names it already; a bare base URL gets /v7."""
    url = url.rstrip("/")
    return url if _CCOMPAT in url else f"{url}{_CCOMPAT}v7"


class RegistryClient:
    """Looks up writer schemas by id (a `cdc.avro_records.SchemaLookup`), cached per id."""

    def __init__(
        self,
        url: str,
        *,
        auth: HttpAuth = NO_REGISTRY_AUTH,
        timeout: float = 10.0,
        cache_size: int = DEFAULT_CACHE_SIZE,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = ccompat_url(url)
        self._auth = auth
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout, transport=transport, **httpx_options(auth)
        )
        self._cache: OrderedDict[int, WriterSchema] = OrderedDict()
        self._cache_size = cache_size

    def __call__(self, schema_id: int) -> WriterSchema:
        cached = self._cache.get(schema_id)
        if cached is not None:
            self._cache.move_to_end(schema_id)
            return cached
        schema = writer_schema(schema_id, self._fetch(schema_id))
        self._cache[schema_id] = schema
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return schema

    def _fetch(self, schema_id: int) -> str:
        path = f"/schemas/ids/{schema_id}"
        try:
            response = self._http.get(path)
        except httpx.HTTPError as exc:
            if refused := access_problem(_SERVICE, self.url, self._auth, error=exc):
                raise refused from None
            raise RegistryUnavailable(
                f"schema registry at {self.url} did not answer GET {path} ({exc}); check --registry-url "
                "(SCHEMA_REGISTRY_URL) and that the registry is running"
            ) from exc
        if refused := access_problem(_SERVICE, self.url, self._auth, status=response.status_code):
            raise refused
        if response.status_code == 404:
            raise SchemaNotFound(schema_id, self.url)
        if response.status_code >= 400:
            raise RegistryUnavailable(
                f"schema registry at {self.url} answered GET {path} with {response.status_code}: "
                f"{response.text[:200]}"
            )
        try:
            return str(response.json()["schema"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryUnavailable(
                f"schema registry at {self.url} answered GET {path} without a schema ({exc}); is this "
                "URL the registry's Confluent-compatible API (/apis/ccompat/v7)?"
            ) from exc

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
