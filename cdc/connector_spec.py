"""A typed spec for one Debezium Postgres connector, rendered to Connect's flat config (pure).

Production-minded defaults, each for a reason:
- pgoutput (built into Postgres; no server plugin) and a slot + publication named after the connector,
  so two connectors never share (and fight over) a slot; publication `filtered` = only our tables.
- Heartbeats with an action query that upserts one row into a small heartbeat table which is itself
  captured: even when every captured table is idle, the slot then sees changes and can advance, so it
  does not pin WAL. `heartbeat_table_ddl()` creates the table (`cdc apply` runs it in pre-flight).
- Compacted topics created by Connect (topic-creation group `default`): the latest value per primary
  key is the row; `tombstones.on.delete=true` lets compaction drop deleted keys.
- Value modes chosen so `cdc.values` decodes exactly: numeric as string (+ propagated source type, so
  the decoder knows the string is a number), intervals as ISO strings, microsecond times, bytea as
  bytes (base64 in JSON — exact), hstore as JSON.
- No Debezium context headers (`extended.headers.enabled=false`): ~190 bytes of metadata per record
  that nothing downstream here reads; `extra` turns them back on (for OpenLineage).
- Truncates stay skipped (Debezium's default): a truncate event has a null key and a compacted topic
  rejects null keys, which would fail the task.
- Large rows: `topics.max_message_bytes` (default 32 MiB, `kafkakit.limits`) is set on the topics
  Connect creates and on the connector's producer (max.request.size, buffer.memory), so a row of
  16 MB is carried without touching the brokers' settings. Kafka's 1 MB default would fail the task,
  and with it the capture of every table, on the first larger row. A record still over the limit is
  set aside by the toolkit's Connect transform (`topics.oversize: route`, the default): a marker on
  `<topic_prefix>.oversize` names it and `cdc health` counts it, and the connector keeps running
  (`connect-plugins/oversize-router`; `fail` leaves it out, for a Connect without the plugin).

Record formats (`format`, the converters for keys and values; `DEFAULT_FORMAT` when a spec names none):
- `avro` (the default): Apicurio's Connect AvroConverter (registry client 2.x, v2 API) for keys and
  values, Confluent framing (magic byte 0 + 4-byte content id + Avro binary; ids in the payload, not in
  headers), schemas auto-registered as `<topic>-key` / `<topic>-value` in the registry at
  `registry.url` (the URL *Connect* reaches, as `database` is Postgres seen from Connect). Debezium
  adjusts schema and field names to Avro's rules. Each record's schema id comes from the toolkit's
  resolver (`registry.resolver: toolkit`, `SCHEMA_RESOLVER_CLASS`; `apicurio` for a worker without
  its jar). The smallest records and the fastest snapshot of the three (issue 19's benchmark: the
  figures are in bench/results/history.md).
  A spec that names no `registry` gets the `registry_url` its loader is given (`from_file`,
  `from_mapping`): the `cdc` CLI passes its endpoint (--registry-url, else SCHEMA_REGISTRY_URL, else
  `kafkakit.settings.Endpoints`' default); this module never reads the environment. Without either,
  an Avro spec is refused, naming both and `format: json`.
- `json`: JsonConverter with the Connect schema inline in every record; `cdc tail`/`decode` type values
  by it; no registry. Largest: every record carries its schema.
- `json-schemaless`: JsonConverter without schemas (several times smaller than `json`): the materializers type
  columns by their DDL; `cdc tail`/`decode` cannot type these records.
The value modes are the same for all three, so `cdc` decodes Avro and JSON to the same Python values.

Spec files (YAML or JSON) use the field names below; unknown keys are refused. `extra` passes raw
Debezium/Connect options through (it may override defaults, not the keys a field manages).
Secrets (`database.password`, any `extra` value) may be config-provider references, `{env: NAME}` or
`{file: PATH, key: KEY}`: Connect gets the placeholder (`${env:NAME}`, `${file:PATH:KEY}`), never the
secret, and pre-flight resolves it to log in (cdc.secret_refs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from psycopg.conninfo import conninfo_to_dict

from cdc.errors import SpecError
from cdc.secret_refs import REFERENCE_FORMS, reference_text
from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from kafkakit.limits import BROKER_REQUEST_CEILING_BYTES, CDC_MAX_RECORD_BYTES, producer_buffer_bytes

POSTGRES_CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
_JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"
SCHEMA_RESOLVER_CLASS = "kafkatoolkit.registry.SchemaIdentityResolver"
FORMATS = ("avro", "json", "json-schemaless")
# The format a spec gets when it names none: the fastest typed one in issue 19's three-format
# benchmark ("the fast path is the default path"); change it here only.
DEFAULT_FORMAT = "avro"
# Deprecated: with `format: json`, a spec's `extra` for records without inline schemas; write
# `format: json-schemaless` instead.
SCHEMALESS_JSON: Mapping[str, str] = {
    "key.converter": _JSON_CONVERTER,
    "key.converter.schemas.enable": "false",
    "value.converter": _JSON_CONVERTER,
    "value.converter.schemas.enable": "false",
}
_CONVERTER_PREFIXES = ("key.converter", "value.converter")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*$")
_SLOT = re.compile(r"^[a-z0-9_]{1,63}$")
OVERSIZE_TRANSFORM = "toolkit_oversize"
OVERSIZE_ROUTER_CLASS = "kafkatoolkit.connect.OversizeRouter"
_OVERSIZE_POLICIES = ("route", "fail")
_RESOLVERS = ("toolkit", "apicurio")
_SNAPSHOT_MODES = ("initial", "always", "initial_only", "no_data", "when_needed", "configuration_based")


def sanitize_identifier(text: str, prefix: str = "dbz_") -> str:
    """A Postgres slot/publication name from free text: [a-z0-9_], at most 63 characters."""
    return (prefix + re.sub(r"[^a-z0-9_]", "_", text.lower()))[:63]


@dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseSpec:
    """How the Connect worker reaches Postgres (the connector's login needs REPLICATION)."""

    hostname: str
    port: int = 5432
    user: str
    password: str = field(default="", repr=False)
    dbname: str

    @classmethod
    def from_dsn(cls, dsn: str) -> DatabaseSpec:
        """Build from a libpq DSN/URL such as postgresql://user:pw@host:5432/db."""
        try:
            parts = conninfo_to_dict(dsn)
        except Exception as exc:  # psycopg raises ProgrammingError for a malformed DSN
            raise SpecError(
                f"database DSN is malformed ({exc}); write postgresql://user@host:port/db"
            ) from exc
        return cls(
            hostname=str(parts.get("host") or "127.0.0.1"),
            port=int(parts.get("port") or 5432),
            user=str(parts.get("user") or "postgres"),
            password=str(parts.get("password") or ""),
            dbname=str(parts.get("dbname") or parts.get("user") or "postgres"),
        )

    def conninfo(self) -> dict[str, Any]:
        """Keyword arguments for psycopg.connect with exactly the connector's credentials."""
        return {
            "host": self.hostname,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": self.dbname,
        }


# Debezium's Postgres TLS settings (a spec's `extra`) -> the libpq keywords they stand for.
_TLS_SETTINGS = {
    f"database.{name}": name for name in ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistrySpec:
    """How the Connect worker reaches the schema registry (Apicurio), for `format: avro`.

    `url` is the registry's base URL as Connect sees it (http://apicurio:8080 in a container network);
    a URL ending in an API path (/apis/ccompat/v7, /apis/registry/v2 or /v3) is cut back to the base.
    `resolver` finds each record's schema id: `toolkit` (the default) is `SCHEMA_RESOLVER_CLASS`,
    which must be installed in the converter's plugin folder; `apicurio` is the converter's own,
    for a Connect cluster without it (the same records, with several times the task's CPU).
    """

    url: str
    resolver: str = "toolkit"

    @classmethod
    def from_url(cls, url: str) -> RegistrySpec:
        return cls(url=url)

    @property
    def base_url(self) -> str:
        return _API_PATH.sub("", self.url.rstrip("/"))

    @property
    def v2_api_url(self) -> str:
        """What Apicurio's 2.x converter speaks (3.x registries still serve the v2 API)."""
        return f"{self.base_url}/apis/registry/v2"


_API_PATH = re.compile(r"/apis/(ccompat/v\d+|registry/v\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatSpec:
    enabled: bool = True
    interval_ms: int = 10_000
    table: str = "public.cdc_heartbeat"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSpec:
    partitions: int = 1
    # None: the cluster's `default.replication.factor` (Connect passes -1 to the broker), so a spec
    # written on one broker keeps working on three, where the cluster's operators set RF 3.
    replication_factor: int | None = None
    # The largest change record (bytes, as serialized); the topic and the connector's producer get it.
    max_message_bytes: int = CDC_MAX_RECORD_BYTES
    # A larger record: "route" sets it aside (a marker on <topic_prefix>.oversize), "fail" fails the task.
    oversize: str = "route"


# Config keys a spec field owns; `extra` may not set them (it would silently fight the field).
_MANAGED_KEYS = frozenset(
    {
        "name",
        "connector.class",
        "database.hostname",
        "database.port",
        "database.user",
        "database.password",
        "database.dbname",
        "topic.prefix",
        "table.include.list",
        "message.key.columns",
        "slot.name",
        "publication.name",
        "snapshot.mode",
        "heartbeat.interval.ms",
        "heartbeat.action.query",
        "topic.creation.default.partitions",
        "topic.creation.default.replication.factor",
        "topic.creation.default.max.message.bytes",
        "producer.override.max.request.size",
        "producer.override.buffer.memory",
        "unavailable.value.placeholder",
        # The decoder reads array elements' time units from it (Debezium names no type on elements).
        "time.precision.mode",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectorSpec:
    name: str
    database: DatabaseSpec
    topic_prefix: str
    tables: tuple[str, ...]
    message_key_columns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    slot_name: str | None = None
    publication_name: str | None = None
    snapshot_mode: str = "initial"
    heartbeat: HeartbeatSpec = HeartbeatSpec()
    topics: TopicSpec = TopicSpec()
    unavailable_value_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER
    format: str = DEFAULT_FORMAT
    registry: RegistrySpec | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = list(_problems(self))
        if problems:
            raise SpecError("connector spec is invalid: " + "; ".join(problems))

    # ---- derived names -------------------------------------------------------------------------
    @property
    def resolved_slot_name(self) -> str:
        return self.slot_name or sanitize_identifier(self.name)

    @property
    def resolved_publication_name(self) -> str:
        return self.publication_name or sanitize_identifier(self.name, prefix="dbz_pub_")

    @property
    def captured_tables(self) -> tuple[str, ...]:
        """Tables in the publication: the user's plus the heartbeat table (so heartbeats reach the slot)."""
        if self.heartbeat.enabled and self.heartbeat.table not in self.tables:
            return (*self.tables, self.heartbeat.table)
        return self.tables

    def topic_for(self, table: str) -> str:
        return f"{self.topic_prefix}.{table}"

    @property
    def oversize_topic(self) -> str | None:
        """Where markers of records over the size limit go (two segments: never a table's topic)."""
        return f"{self.topic_prefix}.oversize" if self.topics.oversize == "route" else None

    def key_columns_for(self, table: str) -> tuple[str, ...]:
        return dict(self.message_key_columns).get(table, ())

    def heartbeat_table_ddl(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {_quote_table(self.heartbeat.table)} "
            "(connector text PRIMARY KEY, beat_at timestamptz NOT NULL)"
        )

    def heartbeat_query(self) -> str:
        literal = self.name.replace("'", "''")
        return (
            f"INSERT INTO {_quote_table(self.heartbeat.table)} (connector, beat_at) VALUES ('{literal}', now()) "
            "ON CONFLICT (connector) DO UPDATE SET beat_at = EXCLUDED.beat_at"
        )

    # ---- rendering -----------------------------------------------------------------------------
    def preflight_conninfo(
        self,
        resolve: Callable[[Mapping[str, str]], Mapping[str, str]] | None = None,
        at: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        """`database.conninfo()` plus the TLS settings the connector gets in `extra` (Debezium's
        `database.sslmode`, `sslrootcert`, ... are libpq's): pre-flight logs in as securely as the
        connector will, never downgraded to libpq's default `prefer` with the replication password.

        `resolve` maps the login's connector options (`database.password`, ...) to their values with
        config-provider placeholders replaced (cdc.secret_refs.resolve_fields), as Connect's worker
        will; without it the placeholders are taken literally. `at` (host, port): where this machine
        reaches the same server when Connect reaches it at another address (compose, Kubernetes)."""
        tls = {key: self.extra[key] for key in _TLS_SETTINGS if self.extra.get(key)}
        login = {
            "database.hostname": self.database.hostname,
            "database.user": self.database.user,
            "database.password": self.database.password,
            "database.dbname": self.database.dbname,
            **tls,
        }
        given = dict(login if resolve is None else resolve(login))
        host, port = at or (given["database.hostname"], self.database.port)
        return {
            **self.database.conninfo(),
            "host": host,
            "port": port,
            "user": given["database.user"],
            "password": given["database.password"],
            "dbname": given["database.dbname"],
            **{_TLS_SETTINGS[key]: given[key] for key in tls},
        }

    def to_config(self) -> dict[str, str]:
        """Connect's flat string config (what PUT /connectors/{name}/config takes)."""
        config: dict[str, str] = {
            "connector.class": POSTGRES_CONNECTOR_CLASS,
            "tasks.max": "1",
            "plugin.name": "pgoutput",
            "database.hostname": self.database.hostname,
            "database.port": str(self.database.port),
            "database.user": self.database.user,
            "database.password": self.database.password,
            "database.dbname": self.database.dbname,
            "topic.prefix": self.topic_prefix,
            "table.include.list": ",".join(_table_regex(t) for t in self.captured_tables),
            "slot.name": self.resolved_slot_name,
            "publication.name": self.resolved_publication_name,
            "publication.autocreate.mode": "filtered",
            "snapshot.mode": self.snapshot_mode,
            "tombstones.on.delete": "true",
            "decimal.handling.mode": "string",
            "interval.handling.mode": "string",
            "time.precision.mode": "adaptive_time_microseconds",
            "binary.handling.mode": "bytes",
            "hstore.handling.mode": "json",
            # The decoder needs the source type to tell a numeric-as-string from text.
            "column.propagate.source.type": ".*",
            # Debezium hands Connect a batch when max.batch.size (2048) changes are queued or this
            # much time has passed: its default 500 ms was most of a live change's wait at tens of
            # changes/s. A full batch still goes at once, so a snapshot is not slowed.
            "poll.interval.ms": "50",
            "unavailable.value.placeholder": self.unavailable_value_placeholder,
            # Debezium's context headers (`__debezium.context.*`: the connector's logical name, task,
            # plugin and run id, for its OpenLineage integration) on every record: for a small
            # row nearly half as many bytes again as its Avro key and value, and the Kafka client
            # parses them for every record a materializer reads even when Spark drops them, so a
            # backfill reads faster without them. Nothing in the toolkit reads them;
            # `extra: {extended.headers.enabled: "true"}` brings them back.
            "extended.headers.enabled": "false",
            # Pin the format's converters instead of trusting the worker's defaults.
            **self._converters(),
            "topic.creation.default.partitions": str(self.topics.partitions),
            "topic.creation.default.replication.factor": str(self.topics.replication_factor or -1),
            "topic.creation.default.cleanup.policy": "compact",
            "topic.creation.default.max.message.bytes": str(self.topics.max_message_bytes),
            "producer.override.max.request.size": str(self.topics.max_message_bytes),
            "producer.override.buffer.memory": str(producer_buffer_bytes(self.topics.max_message_bytes)),
        }
        if self.message_key_columns:
            config["message.key.columns"] = ";".join(
                f"{table}:{','.join(cols)}" for table, cols in self.message_key_columns
            )
        if self.heartbeat.enabled:
            config["heartbeat.interval.ms"] = str(self.heartbeat.interval_ms)
            config["heartbeat.action.query"] = self.heartbeat_query()
        config.update(self.extra)
        if self.oversize_topic is not None:
            config.update(self._oversize_router(config))
        return config

    def _converters(self) -> dict[str, str]:
        """Keys and values in the spec's format (Debezium's name adjustment too, for Avro)."""
        if self.format != "avro":
            inline = "true" if self.format == "json" else "false"
            config = {side: _JSON_CONVERTER for side in _CONVERTER_PREFIXES}
            config.update({f"{side}.schemas.enable": inline for side in _CONVERTER_PREFIXES})
            return config
        assert self.registry is not None  # __post_init__ refuses avro without a registry
        options = {
            "apicurio.registry.url": self.registry.v2_api_url,
            "apicurio.registry.auto-register": "true",
            # Confluent framing: magic byte 0 + 4-byte id, resolvable through the ccompat API.
            "apicurio.registry.as-confluent": "true",
            "apicurio.registry.use-id": "contentId",
            # The 2.x converter's default moves the id to record headers and drops the framing.
            "apicurio.registry.headers.enabled": "false",
        }
        if self.registry.resolver == "toolkit":
            # Apicurio's own resolver renders every record's schema to JSON to find its id: most of
            # the task thread's time on a snapshot. Ours remembers the id per schema object.
            options["apicurio.registry.schema-resolver"] = SCHEMA_RESOLVER_CLASS
        config = {side: AVRO_CONVERTER for side in _CONVERTER_PREFIXES}
        config.update({f"{side}.{k}": v for side in _CONVERTER_PREFIXES for k, v in options.items()})
        # Avro names allow [A-Za-z0-9_] only: Debezium replaces the rest in schema and field names.
        config.update({"schema.name.adjustment.mode": "avro", "field.name.adjustment.mode": "avro"})
        return config

    def _oversize_router(self, config: Mapping[str, str]) -> dict[str, str]:
        """The OversizeRouter, last in the chain, measuring records with the connector's own converters."""
        chain = [t.strip() for t in config.get("transforms", "").split(",") if t.strip()]
        prefix = f"transforms.{OVERSIZE_TRANSFORM}."
        router = {
            "transforms": ",".join([*chain, OVERSIZE_TRANSFORM]),
            prefix + "type": OVERSIZE_ROUTER_CLASS,
            prefix + "max.bytes": str(self.topics.max_message_bytes),
            prefix + "topic": str(self.oversize_topic),
        }
        converters = {k: v for k, v in config.items() if k.startswith(("key.converter", "value.converter"))}
        router.update({prefix + k: v for k, v in converters.items()})
        return router

    # ---- loading -------------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path, *, registry_url: str | None = None) -> ConnectorSpec:
        """Load a YAML (.yaml/.yml) or JSON (.json) spec; errors name the file and the offending key.
        `registry_url`: see `from_mapping`."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot read spec file {p}: {exc.strerror}") from exc
        try:
            if p.suffix in (".yaml", ".yml"):
                doc = yaml.safe_load(text)
            elif p.suffix == ".json":
                doc = json.loads(text)
            else:
                raise SpecError(f"spec file {p} must end in .yaml, .yml or .json")
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise SpecError(f"spec file {p} is not valid {p.suffix[1:].upper()}: {exc}") from exc
        try:
            return cls.from_mapping(doc, registry_url=registry_url)
        except SpecError as exc:
            raise SpecError(f"{p}: {exc}") from exc

    @classmethod
    def from_mapping(cls, doc: Any, *, registry_url: str | None = None) -> ConnectorSpec:
        """A spec from its parsed document. `registry_url` is the registry an Avro spec gets when it
        names none (the caller's endpoint, read by the shell from its flag or environment); a spec's own
        `registry` always wins, and a JSON spec takes none."""
        if not isinstance(doc, dict):
            raise SpecError("a connector spec must be a mapping of field names to values")
        _refuse_unknown(doc, cls, "spec")
        for required in ("name", "database", "topic_prefix", "tables"):
            if required not in doc:
                raise SpecError(f"missing required key {required!r}")
        args = dict(doc)
        args["database"] = _nested(DatabaseSpec, _with_secret_refs(doc["database"]), "database")
        if "heartbeat" in doc:
            args["heartbeat"] = _nested(HeartbeatSpec, doc["heartbeat"], "heartbeat")
        if "topics" in doc:
            args["topics"] = _nested(TopicSpec, doc["topics"], "topics")
        if doc.get("registry") is not None:
            args["registry"] = _nested(RegistrySpec, doc["registry"], "registry")
        elif registry_url is not None and doc.get("format", DEFAULT_FORMAT) == "avro":
            # The registry is an endpoint like Kafka's: configured once, not repeated in every spec.
            args["registry"] = RegistrySpec.from_url(registry_url)
        if "format" in doc and not isinstance(doc["format"], str):
            raise SpecError(f"format must be one of {', '.join(FORMATS)}, got {doc['format']!r}")
        args["tables"] = tuple(_str_list(doc["tables"], "tables"))
        mkc = doc.get("message_key_columns") or {}
        if not isinstance(mkc, dict):
            raise SpecError("message_key_columns must map table -> list of columns")
        args["message_key_columns"] = tuple(
            (str(t), tuple(_str_list(cols, f"message_key_columns.{t}"))) for t, cols in mkc.items()
        )
        extra = doc.get("extra") or {}
        if not isinstance(extra, dict):
            raise SpecError("extra must be a mapping of Debezium option -> value")
        args["extra"] = {
            str(k): reference_text(v, f"extra.{k}") if isinstance(v, dict) else _scalar_text(v, f"extra.{k}")
            for k, v in extra.items()
        }
        return cls(**args)


def _problems(spec: ConnectorSpec) -> list[str]:
    out = []
    if not _NAME.match(spec.name):
        out.append(f"name {spec.name!r} must be letters, digits, '.', '_' or '-' (it goes into URLs)")
    if not _NAME.match(spec.topic_prefix):
        out.append(f"topic_prefix {spec.topic_prefix!r} must be letters, digits, '.', '_' or '-'")
    if not spec.tables:
        out.append("tables must list at least one schema.table")
    for table in (*spec.tables, *(t for t, _ in spec.message_key_columns), spec.heartbeat.table):
        if not _TABLE.match(table):
            out.append(f"table {table!r} must be written schema.table (e.g. public.orders)")
    for table, cols in spec.message_key_columns:
        if not cols:
            out.append(f"message_key_columns.{table} must name at least one column")
    if spec.slot_name is not None and not _SLOT.match(spec.slot_name):
        out.append(f"slot_name {spec.slot_name!r} must be 1-63 characters of [a-z0-9_]")
    if spec.publication_name is not None and not _SLOT.match(spec.publication_name):
        out.append(f"publication_name {spec.publication_name!r} must be 1-63 characters of [a-z0-9_]")
    if spec.snapshot_mode not in _SNAPSHOT_MODES:
        out.append(f"snapshot_mode {spec.snapshot_mode!r} is not one of {', '.join(_SNAPSHOT_MODES)}")
    replication = spec.topics.replication_factor
    if spec.topics.partitions < 1 or (replication is not None and replication < 1):
        out.append(
            "topics.partitions and topics.replication_factor must be >= 1 (leave replication_factor out "
            "for the cluster's default.replication.factor)"
        )
    if not 1024 <= spec.topics.max_message_bytes <= BROKER_REQUEST_CEILING_BYTES:
        out.append(
            f"topics.max_message_bytes {spec.topics.max_message_bytes} must be between 1024 and "
            f"{BROKER_REQUEST_CEILING_BYTES} (a broker refuses requests over socket.request.max.bytes, "
            "100 MiB by default)"
        )
    if spec.heartbeat.interval_ms < 1:
        out.append("heartbeat.interval_ms must be >= 1")
    if spec.topics.oversize not in _OVERSIZE_POLICIES:
        out.append(f"topics.oversize {spec.topics.oversize!r} is not one of {', '.join(_OVERSIZE_POLICIES)}")
    out.extend(_format_problems(spec))
    clash = sorted(
        k for k in spec.extra if k in _MANAGED_KEYS or k.startswith(f"transforms.{OVERSIZE_TRANSFORM}.")
    )
    if clash:
        out.append(f"extra sets {clash}, which spec fields manage; use the spec fields instead")
    return out


def _format_problems(spec: ConnectorSpec) -> list[str]:
    if spec.format not in FORMATS:
        return [f"format {spec.format!r} is not one of {', '.join(FORMATS)}"]
    out = []
    if spec.format == "avro" and spec.registry is None:
        out.append(
            "format avro (the default) needs registry.url: the schema registry's base URL as the Connect "
            "worker reaches it (e.g. http://apicurio:8080). Write it in the spec, or let `cdc validate`/"
            "`cdc apply` fill it from --registry-url or SCHEMA_REGISTRY_URL (ConnectorSpec.from_file(..., "
            "registry_url=...) in Python); or write `format: json` for records that carry their schema "
            "inline and need no registry"
        )
    if spec.registry is not None and spec.registry.resolver not in _RESOLVERS:
        out.append(
            f"registry.resolver {spec.registry.resolver!r} is not one of {', '.join(_RESOLVERS)} (toolkit, "
            "the default, needs the toolkit's schema resolver jar in the Avro converter's plugin folder; "
            "apicurio is the converter's own)"
        )
    if spec.registry is not None and not re.match(r"^https?://[^/\s]+", spec.registry.url):
        out.append(
            f"registry.url {spec.registry.url!r} must be an http:// or https:// URL (a spec without "
            "registry.url gets --registry-url / SCHEMA_REGISTRY_URL)"
        )
    # `extra` may still pick JSON converters for format json (the deprecated SCHEMALESS_JSON); with
    # another format it would silently fight the format's own converters.
    managed = (*_CONVERTER_PREFIXES, "schema.name.adjustment.mode", "field.name.adjustment.mode")
    fights = sorted(k for k in spec.extra if spec.format != "json" and k.startswith(managed))
    if fights:
        out.append(
            f"extra sets {fights}, which format {spec.format!r} manages; remove them from extra (for JSON "
            "records write `format: json` or `format: json-schemaless` instead)"
        )
    return out


def _refuse_unknown(doc: Mapping[str, Any], cls: type, where: str) -> None:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise SpecError(
            f"unknown key(s) {unknown} in {where}; known keys: {sorted(known)} "
            "(raw Debezium options go under 'extra')"
        )


def _with_secret_refs(database: Any) -> Any:
    """`database` with a reference mapping as its password rendered to the placeholder Connect gets
    (cdc.secret_refs); a password that is neither text nor a reference is refused, never echoed."""
    if not isinstance(database, dict) or "password" not in database:
        return database
    password = database["password"]
    if isinstance(password, dict):
        return {**database, "password": reference_text(password, "database.password")}
    if password is not None and not isinstance(password, str):
        # a secret is never echoed: a YAML password of digits arrives as a number
        raise SpecError(
            f"database.password must be str, got a {type(password).__name__} (quote it in YAML, or "
            f"write {REFERENCE_FORMS})"
        )
    return database


def _nested(cls: type[Any], doc: Any, where: str) -> Any:
    if not isinstance(doc, dict):
        raise SpecError(f"{where} must be a mapping")
    _refuse_unknown(doc, cls, where)
    for f in fields(cls):
        expected = _SIMPLE_TYPES.get(str(f.type))
        value = doc.get(f.name)
        if value is not None and expected is not None and type(value) is not expected:
            # a secret is never echoed: a YAML password of digits arrives as a number
            got = f"a {type(value).__name__}" if "password" in f.name else repr(value)
            raise SpecError(f"{where}.{f.name} must be {f.type}, got {got} (quote it in YAML)")
    try:
        return cls(**doc)
    except TypeError as exc:
        raise SpecError(f"{where}: {exc}") from exc


_SIMPLE_TYPES: dict[str, type] = {"str": str, "int": int, "bool": bool, "int | None": int}


def _str_list(value: Any, where: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where} must be a list of strings")
    return value


def _scalar_text(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise SpecError(f"{where} must be a string, number or boolean")


def _table_regex(table: str) -> str:
    return re.escape(table)


def _quote_table(table: str) -> str:
    schema, name = table.split(".", 1)
    return f'"{schema}"."{name}"'
