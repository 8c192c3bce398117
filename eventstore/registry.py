"""Schema registry access through the Confluent-compatible REST API (Apicurio's `/apis/ccompat/v7`).

`HttpRegistry` talks to the real registry; `MemoryRegistry` implements the same protocol in-process for
unit tests and offline tools. Lookups by id are cached: a schema id never changes its schema.
`HttpRegistry` logs in with `auth` (SCHEMA_REGISTRY_USERNAME/PASSWORD or _TOKEN, _CA_FILE, _CLIENT_CERT;
kafkakit.http_auth); a refused login or TLS handshake is `ServiceAccessRefused` naming those settings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx

from eventstore.errors import RegistryUnavailable, SchemaNotFound
from eventstore.schemas import canonical
from kafkakit.http_auth import NO_REGISTRY_AUTH, HttpAuth, access_problem, httpx_options
from kafkakit.subjects import every_subject

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SERVICE = "the schema registry"


@dataclass(frozen=True, slots=True)
class Registered:
    subject: str
    version: int
    schema_id: int
    text: str


class Registry(Protocol):
    def register(self, subject: str, text: str) -> int: ...
    def schema_text(self, schema_id: int) -> str: ...
    def latest(self, subject: str) -> Registered | None: ...
    def versions(self, subject: str) -> tuple[Registered, ...]: ...
    def is_compatible(self, subject: str, text: str) -> tuple[bool, tuple[str, ...]]: ...
    def subjects(self) -> tuple[str, ...]: ...


class HttpRegistry:
    """A small Confluent-API client; every failure becomes RegistryUnavailable naming the URL."""

    def __init__(self, url: str, *, timeout: float = 10.0, auth: HttpAuth = NO_REGISTRY_AUTH) -> None:
        self.url = url.rstrip("/")
        self._auth = auth
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout, headers={"Content-Type": CONTENT_TYPE}, **httpx_options(auth)
        )
        self._by_id: dict[int, str] = {}
        self._ids: dict[tuple[str, str], int] = {}

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            if refused := access_problem(_SERVICE, self.url, self._auth, error=exc):
                raise refused from None
            raise RegistryUnavailable(
                f"schema registry at {self.url} did not answer {method} {path} ({exc}); "
                "check SCHEMA_REGISTRY_URL and that the registry is running"
            ) from exc
        if refused := access_problem(_SERVICE, self.url, self._auth, status=response.status_code):
            raise refused
        return response

    def _ok(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise RegistryUnavailable(
                f"schema registry {response.request.method} {response.request.url.path} answered "
                f"{response.status_code}: {response.text[:300]}"
            )
        return response.json()

    def register(self, subject: str, text: str) -> int:
        key = (subject, canonical(text))
        if key not in self._ids:
            body = {"schema": text, "schemaType": "AVRO"}
            found = self._ok(self._call("POST", f"/subjects/{subject}/versions", body))
            self._ids[key] = int(found["id"])
            self._by_id[int(found["id"])] = text
        return self._ids[key]

    def schema_text(self, schema_id: int) -> str:
        if schema_id not in self._by_id:
            response = self._call("GET", f"/schemas/ids/{schema_id}")
            if response.status_code == 404:
                raise SchemaNotFound(f"schema id {schema_id} is not in the registry at {self.url}")
            self._by_id[schema_id] = str(self._ok(response)["schema"])
        return self._by_id[schema_id]

    def latest(self, subject: str) -> Registered | None:
        return self._version(subject, "latest")

    def versions(self, subject: str) -> tuple[Registered, ...]:
        """Every version of `subject`, oldest first, its text byte for byte as registered; () if none.

        The bytes matter: Apicurio's other endpoints return a compacted text, and it tells schemas apart
        by a hash of the raw text, so registering the compacted form elsewhere would mint a new id.
        """
        response = self._call("GET", f"/subjects/{subject}/versions")
        if response.status_code == 404:
            return ()
        found = []
        for number in sorted(int(v) for v in self._ok(response)):
            version = self._version(subject, str(number))
            if version is not None:  # else deleted meanwhile
                found.append(replace(version, text=self._raw_text(version.schema_id)))
        return tuple(found)

    def _raw_text(self, schema_id: int) -> str:
        response = self._call("GET", f"/schemas/ids/{schema_id}/schema")
        self._ok(response)  # raises on an error status
        return response.text

    def _version(self, subject: str, version: str) -> Registered | None:
        response = self._call("GET", f"/subjects/{subject}/versions/{version}")
        if response.status_code == 404:
            return None
        doc = self._ok(response)
        return Registered(subject, int(doc["version"]), int(doc["id"]), str(doc["schema"]))

    def is_compatible(self, subject: str, text: str) -> tuple[bool, tuple[str, ...]]:
        # The check only means something under a rule: pin BACKWARD on the subject first (idempotent PUT).
        self._ok(self._call("PUT", f"/config/{subject}", {"compatibility": "BACKWARD"}))
        body = {"schema": text, "schemaType": "AVRO"}
        response = self._call("POST", f"/compatibility/subjects/{subject}/versions/latest?verbose=true", body)
        if response.status_code == 404:
            return True, ()
        doc = self._ok(response)
        return bool(doc.get("is_compatible")), tuple(str(m) for m in doc.get("messages") or ())

    def subjects(self) -> tuple[str, ...]:
        return tuple(
            every_subject(
                lambda offset, limit: self._ok(self._call("GET", f"/subjects?offset={offset}&limit={limit}"))
            )
        )


class MemoryRegistry:
    """In-process registry with the same semantics (ids unique per distinct schema text)."""

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._versions: dict[str, list[int]] = {}

    def register(self, subject: str, text: str) -> int:
        form = canonical(text)
        forms = [canonical(t) for t in self._texts]
        schema_id = forms.index(form) + 1 if form in forms else self._append(text)
        versions = self._versions.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return schema_id

    def _append(self, text: str) -> int:
        self._texts.append(text)
        return len(self._texts)

    def schema_text(self, schema_id: int) -> str:
        if not 1 <= schema_id <= len(self._texts):
            raise SchemaNotFound(f"schema id {schema_id} is not in the in-memory registry")
        return self._texts[schema_id - 1]

    def latest(self, subject: str) -> Registered | None:
        found = self.versions(subject)
        return found[-1] if found else None

    def versions(self, subject: str) -> tuple[Registered, ...]:
        return tuple(
            Registered(subject, n, schema_id, self._texts[schema_id - 1])
            for n, schema_id in enumerate(self._versions.get(subject, ()), start=1)
        )

    def is_compatible(self, subject: str, text: str) -> tuple[bool, tuple[str, ...]]:
        return True, ()

    def subjects(self) -> tuple[str, ...]:
        return tuple(self._versions)
