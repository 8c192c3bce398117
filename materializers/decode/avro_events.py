"""Decode event-store records in the JVM with `from_avro`, picking each writer schema by registry id.

Per micro-batch (driver): the distinct schema ids in the batch are collected (a tiny aggregate), each
new id's writer schema is fetched once from the registry (cached, bounded: `SchemaCache`; a registry id
never changes meaning), and the batch is decoded with one `from_avro` per id — no Python per record.
A caller that checks the decoded `schema_id`s itself (`WriterSchemas.trusting_cache`, then `learn`)
skips that aggregate: a Spark job of two stages, most of a small live batch's time. Every
wanted field is projected into one wide row (null where an event type lacks it), so all event types
meet in one DataFrame. Records with a broken envelope, an id the registry does not know or a body
that does not decode become error rows (dead letters), never exceptions.
"""

from __future__ import annotations

import json
import operator
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial, reduce
from typing import TYPE_CHECKING, Any

import httpx

from kafkakit.http_auth import NO_REGISTRY_AUTH, HttpAuth, access_problem, httpx_options
from kafkakit.subjects import every_subject
from materializers.decode import event_shape, positions, spark_avro
from materializers.decode.changes import SOURCE_COLUMNS, source_coordinates
from materializers.errors import SourceUnavailable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


# Bounds, so records from the outside cannot grow the driver's memory or stall its batches: a topic
# holds a few writer schemas, but garbage bytes carry random ids, each one a registry round trip.
MAX_SCHEMAS = 1024  # writer schemas kept; the least recently used goes first (fetched again if seen)
MAX_MISSES = 1024  # ids the registry did not know, remembered ...
MISS_TTL_S = 300.0  # ... for this long, then asked again (a registry restored from a backup)
MAX_LOOKUPS_PER_BATCH = 16  # new ids fetched per batch; the rest stay unknown for this batch
NOT_KNOWN = (
    f" is not in the registry (or not looked up yet: at most {MAX_LOOKUPS_PER_BATCH} new ids per batch)"
)


@dataclass(slots=True)
class SchemaCache:
    """Writer schema texts by id (LRU, `MAX_SCHEMAS`) and recent misses (`MISS_TTL_S`, `MAX_MISSES`)."""

    found: OrderedDict[int, str] = field(default_factory=OrderedDict)
    missing: dict[int, float] = field(default_factory=dict)

    def text(self, schema_id: int) -> str | None:
        text = self.found.get(schema_id)
        if text is not None:
            self.found.move_to_end(schema_id)
        return text

    def put(self, schema_id: int, text: str) -> None:
        self.found[schema_id] = text
        self.missing.pop(schema_id, None)
        while len(self.found) > MAX_SCHEMAS:
            self.found.popitem(last=False)

    def miss(self, schema_id: int, now: float) -> None:
        self.missing.pop(schema_id, None)
        self.missing[schema_id] = now
        while len(self.missing) > MAX_MISSES:
            del self.missing[next(iter(self.missing))]

    def recently_missed(self, schema_id: int, now: float) -> bool:
        at = self.missing.get(schema_id)
        return at is not None and now - at < MISS_TTL_S


def _fetch(url: str, schema_id: int, auth: HttpAuth = NO_REGISTRY_AUTH) -> httpx.Response:
    """GET one writer schema; a refused login or TLS handshake is `SourceUnavailable` naming the
    SCHEMA_REGISTRY_* settings (kafkakit.http_auth's `access_problem`)."""
    try:
        reply = httpx.get(f"{url.rstrip('/')}/schemas/ids/{schema_id}", timeout=10.0, **httpx_options(auth))
    except httpx.HTTPError as exc:
        if refused := access_problem("the schema registry", url, auth, error=exc):
            raise SourceUnavailable(str(refused)) from None
        raise
    status = reply.status_code
    if refused := access_problem("the schema registry", url, auth, status=status):
        raise SourceUnavailable(str(refused))
    return reply


@dataclass(slots=True)
class WriterSchemas:
    """Writer schemas by registry id, from a Confluent-compatible API (Apicurio's ccompat/v7)."""

    url: str
    # Decode with the ids fetched so far, without asking the batch: the caller then `learn`s the
    # batch's `schema_id`s and decodes again if one was new (a record is never refused unasked).
    assume_known: bool = False
    _cache: SchemaCache = field(default_factory=SchemaCache)
    # None: GET <url>/schemas/ids/<id> with `auth` (tests pass their own)
    fetch: Callable[[str, int], httpx.Response] | None = None
    clock: Callable[[], float] = time.monotonic
    auth: HttpAuth = NO_REGISTRY_AUTH

    def trusting_cache(self) -> WriterSchemas:
        """These schemas (the same cache) in `assume_known` mode."""
        return WriterSchemas(self.url, True, self._cache, self.fetch, self.clock, self.auth)

    def known(self) -> dict[int, str]:
        return dict(self._cache.found)

    def new_ids(self, ids: Iterable[int]) -> list[int]:
        """The ids to ask the registry about for one batch: not known, not recently missed, at most
        `MAX_LOOKUPS_PER_BATCH` (sorted, so a re-run batch asks for the same ones)."""
        now = self.clock()
        fresh = (
            i
            for i in sorted(set(ids))
            if i not in self._cache.found and not self._cache.recently_missed(i, now)
        )
        return list(fresh)[:MAX_LOOKUPS_PER_BATCH]

    def learn(self, ids: Iterable[int]) -> bool:
        """Fetch the batch's new ids (`new_ids`); whether one is in the registry (so a decode that
        assumed the known ids only refused records it can decode, and must run again)."""
        # a list, not a generator: every new id is fetched, or any() would stop at the first found and
        # the next decode would refuse the records of the ids left unasked
        return any([self.get(sid) is not None for sid in self.new_ids(ids)])

    def remember(self, schema_id: int, text: str) -> None:
        """Know `text` as the writer schema of `schema_id` (read from the registry by the caller)."""
        self._cache.put(schema_id, text)

    def get(self, schema_id: int) -> str | None:
        """The schema text, or None when the registry answers 404 (the record is dead-lettered)."""
        text = self._cache.text(schema_id)
        if text is not None or self._cache.recently_missed(schema_id, self.clock()):
            return text
        try:
            reply = (
                _fetch(self.url, schema_id, self.auth)
                if self.fetch is None
                else self.fetch(self.url, schema_id)
            )
        except httpx.HTTPError as exc:
            raise SourceUnavailable(
                f"schema registry at {self.url} is unreachable ({exc}); start it or fix SCHEMA_REGISTRY_URL"
            ) from exc
        if reply.status_code == 404:
            self._cache.miss(schema_id, self.clock())
            return None
        if reply.status_code != 200:
            raise SourceUnavailable(
                f"schema registry at {self.url} answered {reply.status_code} for id {schema_id}; check the registry"
            )
        text = str(reply.json()["schema"])
        self._cache.put(schema_id, text)
        return text


def field_names(schema_text: str) -> set[str]:
    doc = json.loads(schema_text)
    return {f["name"] for f in doc.get("fields", [])} if isinstance(doc, dict) else set()


def required_fields(schema_text: str) -> list[str]:
    """The record's fields that no valid body leaves null: their type is not a union with null (pure)."""
    doc = json.loads(schema_text)
    fields = doc.get("fields", []) if isinstance(doc, dict) else []
    return [f["name"] for f in fields if not (isinstance(f["type"], list) and "null" in f["type"])]


def decode(
    df: DataFrame, *, schemas: WriterSchemas, wanted: Mapping[str, str], event_types: Sequence[str]
) -> DataFrame:
    """The decoded frame (see changes.py) of event records: entity, position, event_type, event_ts,
    src_*, error and the wanted fields (null where the writer schema lacks one). A type outside
    `event_types` (the ones the materializer folds) is an error.

    One projection decodes every schema id (`from_avro` under a CASE on the id, so each body is
    parsed once, with its own writer schema); only the distinct ids are collected first. A job
    decoding batch after batch keeps an `EventDecoder` instead, which builds the expressions once.
    """
    return EventDecoder(wanted, tuple(event_types))(df, schemas)


# The decoder's projections, applied in order: the envelope, the bodies, the decoded frame.
_Projections = tuple[list["Column"], list["Column"], list["Column"]]


@dataclass(slots=True)
class EventDecoder:
    """`decode` for one materializer's `wanted` fields and `event_types`, as a `Transform`: its Spark
    expressions are built for the writer schemas known so far and reused while no new one appears
    (they name columns only, so they bind to every batch alike). Building them anew cost a live
    batch most of its time: thousands of py4j round trips."""

    wanted: Mapping[str, str]
    event_types: tuple[str, ...]
    _built: dict[tuple[int, ...], _Projections] = field(default_factory=dict, init=False, repr=False)

    def __call__(self, df: DataFrame, schemas: WriterSchemas) -> DataFrame:
        from pyspark.sql import functions as F

        present = df.where(F.col("value").isNotNull())
        # Trusting the cache, even an empty one (a restarted driver): a record of an id not known yet
        # comes back as an error row with its schema_id, and the caller decodes again once it learned it.
        texts = schemas.known() if schemas.assume_known else self._ids_of(present, schemas)
        known = tuple(sorted(texts))
        if known not in self._built:
            self._built = {known: self._build(texts)}  # only the newest set is used again
        envelope, bodies, decoded = self._built[known]
        return present.select(*envelope).select(*bodies).select(*decoded)

    def _ids_of(self, present: DataFrame, schemas: WriterSchemas) -> dict[int, str]:
        """The writer schemas of the batch's well-formed records (one small Spark job for their ids)."""
        well_formed = present.select(*self._envelope()).where(self._envelope_error().isNull())
        framed = well_formed.select("_sid").distinct()
        ids = sorted(int.from_bytes(r["_sid"], "big") for r in framed.collect())
        schemas.learn(ids)
        return {sid: text for sid in ids if (text := schemas.known().get(sid)) is not None}

    @staticmethod
    def _envelope() -> list[Column]:
        from pyspark.sql import functions as F

        return [
            *[F.col(c) for c in (*SOURCE_COLUMNS, "timestamp")],
            event_shape.stream_id().alias("entity"),
            event_shape.stream_version().alias("version"),
            event_shape.event_type().alias("event_type"),
            event_shape.has_wire_header().alias("framed"),
            event_shape.schema_id_bytes().alias("_sid"),  # compared as bytes: see FRAMING in debezium_avro
        ]

    def _envelope_error(self) -> Column:
        from pyspark.sql import functions as F

        return (
            F.when(F.col("entity").isNull(), F.lit("record key (stream id) is missing"))
            .when(
                F.col("version").isNull() | (F.col("version") < 1),
                F.lit("header stream-version is missing or not a positive integer"),
            )
            .when(F.col("event_type").isNull(), F.lit("header event-type is missing"))
            .when(
                ~F.col("framed"),
                F.lit("value is not in Confluent wire format (magic byte 0 + 4-byte schema id)"),
            )
            .when(
                ~F.col("event_type").isin(*self.event_types),
                F.concat(
                    F.lit("unknown event type "),
                    F.col("event_type"),
                    F.lit(f"; known: {', '.join(self.event_types)}"),
                ),
            )
        )

    def _build(self, texts: Mapping[int, str]) -> _Projections:
        from pyspark.sql import functions as F

        bodies = [
            F.when(
                F.col("_sid") == event_shape.schema_id_literal(sid),
                spark_avro.from_avro(event_shape.avro_body(), text),
            ).alias(f"_e{sid}")
            for sid, text in texts.items()
        ]
        sid = event_shape.schema_id().cast("string")  # a number only for an error's message
        ids = [event_shape.schema_id_literal(i) for i in texts]
        known = F.col("_sid").isin(*ids) if ids else F.lit(False)
        # A body cut short comes back from PERMISSIVE from_avro as a struct of nulls, not as null: a
        # required field left null is what tells it apart from a record that decoded.
        decodes = reduce(
            operator.or_,
            [
                reduce(operator.and_, [F.col(f"_e{i}.`{n}`").isNotNull() for n in required_fields(text)],
                       F.col(f"_e{i}").isNotNull())
                for i, text in texts.items()
            ],
            F.lit(False),
        )  # fmt: skip
        error = (
            self._envelope_error()
            .when(~known, F.concat(F.lit("schema id "), sid, F.lit(NOT_KNOWN)))
            .when(~decodes, F.concat(F.lit("Avro body does not decode with writer schema id "), sid))
        )
        declared = {i: field_names(text) for i, text in texts.items()}

        def wanted_field(name: str, kind: str) -> Column:
            present = [F.col(f"_e{i}.`{name}`") for i, names in declared.items() if name in names]
            return (F.coalesce(*present) if present else F.lit(None)).cast(kind).alias(name)

        decoded = [
            F.col("entity"),
            F.lpad(F.col("version").cast("string"), positions.WIDTH, "0").alias("position"),
            F.col("event_type"),
            F.col("timestamp").alias("event_ts"),
            *source_coordinates(error),
            *[wanted_field(n, t) for n, t in self.wanted.items()],
            # the id to learn (WriterSchemas.learn): only a framed record's the decode was not built with
            F.when(F.col("framed") & ~known, event_shape.schema_id()).alias("schema_id"),
        ]
        return self._envelope(), [F.col("*"), *bodies], decoded


def learn_topic_schemas(schemas: WriterSchemas, topic: str) -> None:
    """Fetch into `schemas` every writer schema of the subjects `<topic>-*`, and only those."""
    for sid, text in sorted(_subject_schemas(schemas.url, topic, schemas.auth).items()):
        schemas.remember(sid, text)


def _subject_schemas(url: str, topic: str, auth: HttpAuth) -> dict[int, str]:
    """The writer schema of every version of the registry subjects `<topic>-*`, by id
    (Confluent-compatible API). A version's document carries its schema's text: asking for each id
    again took a request, a TLS context and a connection more per id at every job start."""
    base = url.rstrip("/")
    try:
        # One client for all of them: a request of its own set up a TLS context and a connection,
        # several times a request's cost on a kept connection, and the listing takes a page per
        # 1,000 subjects.
        with httpx.Client(timeout=10.0, **httpx_options(auth)) as client:
            get = partial(_get, auth=auth, client=client)
            every = every_subject(lambda offset, limit: get(f"{base}/subjects?offset={offset}&limit={limit}"))
            subjects = [s for s in every if s.startswith(f"{topic}-")]
            documents = (
                get(f"{base}/subjects/{subject}/versions/{version}")
                for subject in subjects
                for version in get(f"{base}/subjects/{subject}/versions")
            )
            return {int(d["id"]): str(d["schema"]) for d in documents}
    except httpx.HTTPError as exc:
        raise SourceUnavailable(
            f"schema registry at {url} is unreachable ({exc}); start it or fix SCHEMA_REGISTRY_URL"
        ) from exc


def _get(url: str, auth: HttpAuth = NO_REGISTRY_AUTH, client: httpx.Client | None = None) -> Any:
    """GET a registry document (on `client`, made with `auth`'s options, if given); a refused login or
    TLS handshake is `SourceUnavailable` naming the SCHEMA_REGISTRY_* settings (kafkakit.http_auth)."""
    try:
        reply = client.get(url) if client else httpx.get(url, timeout=10.0, **httpx_options(auth))
        refused = access_problem("the schema registry", url, auth, status=reply.status_code)
    except httpx.HTTPError as exc:
        refused = access_problem("the schema registry", url, auth, error=exc)
        if refused is None:
            raise
    if refused is not None:
        raise SourceUnavailable(str(refused))
    reply.raise_for_status()
    return reply.json()
