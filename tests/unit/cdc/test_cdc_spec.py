"""Loading and rendering connector specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc.connector_spec import (
    AVRO_CONVERTER,
    DEFAULT_FORMAT,
    SCHEMA_RESOLVER_CLASS,
    SCHEMALESS_JSON,
    ConnectorSpec,
    DatabaseSpec,
    RegistrySpec,
    sanitize_identifier,
)
from cdc.errors import SpecError
from cdc.preflight import parse_address
from kafkakit.errors import ConfigError

YAML = """
name: Orders.CDC-v2
database: {hostname: db, port: 5433, user: dbz, password: s3cret, dbname: shop}
topic_prefix: shop
tables: [public.orders, public.events]
message_key_columns: {public.events: [stream_id, version]}
topics: {partitions: 3, replication_factor: 2}
registry: {url: "http://apicurio:8080"}
extra: {snapshot.fetch.size: 5000, skipped.operations: none}
"""
# Where a spec on the default format (Avro) finds its registry when the test is not about that.
REGISTRY = {"url": "http://apicurio:8080"}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_spec_renders_production_defaults(tmp_path: Path) -> None:
    spec = ConnectorSpec.from_file(_write(tmp_path, "s.yaml", YAML))
    config = spec.to_config()
    assert config["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert config["plugin.name"] == "pgoutput" and config["publication.autocreate.mode"] == "filtered"
    assert (
        config["slot.name"] == "dbz_orders_cdc_v2" and config["publication.name"] == "dbz_pub_orders_cdc_v2"
    )
    assert config["table.include.list"] == r"public\.orders,public\.events,public\.cdc_heartbeat"
    assert config["message.key.columns"] == "public.events:stream_id,version"
    assert config["topic.creation.default.cleanup.policy"] == "compact"
    assert config["topic.creation.default.partitions"] == "3"
    assert config["topic.creation.default.replication.factor"] == "2"
    assert config["heartbeat.interval.ms"] == "10000"
    assert config["value.converter"] == config["key.converter"] == AVRO_CONVERTER  # the default format
    assert (
        "cdc_heartbeat" in config["heartbeat.action.query"]
        and "'Orders.CDC-v2'" in config["heartbeat.action.query"]
    )
    for key, value in {
        "tombstones.on.delete": "true",
        "decimal.handling.mode": "string",
        "interval.handling.mode": "string",
        "time.precision.mode": "adaptive_time_microseconds",
        "binary.handling.mode": "bytes",
        "hstore.handling.mode": "json",
        "snapshot.fetch.size": "5000",
        "skipped.operations": "none",
        "database.password": "s3cret",
    }.items():
        assert config[key] == value
    assert "s3cret" not in repr(spec)


def test_json_spec_equals_yaml_spec(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(YAML)
    assert ConnectorSpec.from_file(_write(tmp_path, "s.json", json.dumps(doc))) == ConnectorSpec.from_mapping(
        doc
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(tabels=["x.y"]), r"unknown key\(s\) \['tabels'\] in spec"),
        (lambda d: d["database"].update(pasword="x"), r"unknown key\(s\) \['pasword'\] in database"),
        (lambda d: d["database"].update(port="5432"), "database.port must be int"),
        (lambda d: d.update(tables="public.orders"), "tables must be a list of strings"),
        (lambda d: d.update(tables=["orders"]), "must be written schema.table"),
        (lambda d: d.update(slot_name="Bad-Slot"), r"1-63 characters of \[a-z0-9_\]"),
        (lambda d: d.update(snapshot_mode="sometimes"), "snapshot_mode 'sometimes' is not one of"),
        (lambda d: d.update(extra={"slot.name": "x"}), "extra sets \\['slot.name'\\]"),
        (lambda d: d.update(name="has space"), "name 'has space' must be"),
        (lambda d: d.pop("topic_prefix"), "missing required key 'topic_prefix'"),
    ],
)
def test_bad_specs_are_refused_with_the_key_named(tmp_path: Path, mutate: object, message: str) -> None:
    import yaml

    doc = yaml.safe_load(YAML)
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(SpecError, match=message) as info:
        ConnectorSpec.from_file(_write(tmp_path, "bad.yaml", yaml.safe_dump(doc)))
    assert "bad.yaml" in str(info.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"must end in \.yaml, \.yml or \.json"):
        ConnectorSpec.from_file(_write(tmp_path, "s.toml", "x"))
    with pytest.raises(SpecError, match="not valid JSON"):
        ConnectorSpec.from_file(_write(tmp_path, "s.json", "{"))
    with pytest.raises(SpecError, match="cannot read spec file"):
        ConnectorSpec.from_file(tmp_path / "missing.yaml")
    with pytest.raises(SpecError, match="must be a mapping"):
        ConnectorSpec.from_file(_write(tmp_path, "list.yaml", "- a\n"))


def test_slot_names_are_sanitized_and_bounded() -> None:
    assert sanitize_identifier("Orders-CDC.v2") == "dbz_orders_cdc_v2"
    long = sanitize_identifier("x" * 200)
    assert len(long) == 63 and long.startswith("dbz_")


def test_database_from_dsn() -> None:
    db = DatabaseSpec.from_dsn("postgresql://dbz:pw@pg.example:6543/shop")
    assert (db.hostname, db.port, db.user, db.password, db.dbname) == (
        "pg.example",
        6543,
        "dbz",
        "pw",
        "shop",
    )
    assert "pw" not in repr(db)


def test_heartbeat_can_be_disabled() -> None:
    spec = ConnectorSpec.from_mapping(
        {
            "name": "n",
            "database": {"hostname": "h", "user": "u", "dbname": "d"},
            "topic_prefix": "p",
            "tables": ["public.t"],
            "heartbeat": {"enabled": False},
            "registry": REGISTRY,
        }
    )
    config = spec.to_config()
    assert "heartbeat.action.query" not in config and config["table.include.list"] == r"public\.t"


@pytest.mark.parametrize(
    ("key", "default", "override"),
    [
        ("poll.interval.ms", "50", "500"),  # a live change handed to Connect within 50 ms
        ("extended.headers.enabled", "false", "true"),  # no Debezium context headers on records
    ],
)
def test_a_default_of_the_spec_stands_unless_extra_says_otherwise(
    key: str, default: str, override: str
) -> None:
    doc = {"name": "n", "database": {"hostname": "h", "user": "u", "dbname": "d"}, "topic_prefix": "p",
           "tables": ["public.t"], "registry": REGISTRY}  # fmt: skip
    assert ConnectorSpec.from_mapping(doc).to_config()[key] == default
    tuned = ConnectorSpec.from_mapping({**doc, "extra": {key: override}})
    assert tuned.to_config()[key] == override


def test_record_size_limit_reaches_the_topics_and_the_producer() -> None:
    base = {
        "name": "big",
        "database": {"hostname": "db", "user": "u", "dbname": "d"},
        "topic_prefix": "big",
        "tables": ["public.t"],
        "registry": REGISTRY,
    }
    default = ConnectorSpec.from_mapping(base).to_config()
    assert default["topic.creation.default.max.message.bytes"] == str(32 << 20)
    assert default["producer.override.max.request.size"] == str(32 << 20)
    assert int(default["producer.override.buffer.memory"]) >= 2 * (32 << 20)
    set_ = ConnectorSpec.from_mapping({**base, "topics": {"max_message_bytes": 50 << 20}}).to_config()
    assert set_["producer.override.max.request.size"] == str(50 << 20)
    with pytest.raises(SpecError, match=r"socket\.request\.max\.bytes"):
        ConnectorSpec.from_mapping({**base, "topics": {"max_message_bytes": 200 << 20}})
    with pytest.raises(SpecError, match="spec fields manage"):
        ConnectorSpec.from_mapping({**base, "extra": {"producer.override.max.request.size": "1048576"}})
    with pytest.raises(SpecError, match="spec fields manage"):
        ConnectorSpec.from_mapping({**base, "extra": {"time.precision.mode": "connect"}})


def test_the_oversize_router_is_last_in_the_chain_and_measures_with_the_connectors_converters() -> None:
    base = {
        "name": "big",
        "database": {"hostname": "db", "user": "u", "dbname": "d"},
        "topic_prefix": "big",
        "tables": ["public.t"],
        "format": "json",  # `own` tunes the JSON converter, which only format json lets extra do
    }
    own = {
        "transforms": "unwrap",
        "transforms.unwrap.type": "x.Unwrap",
        "value.converter.schemas.enable": "false",
    }
    config = ConnectorSpec.from_mapping({**base, "extra": own}).to_config()
    assert config["transforms"] == "unwrap,toolkit_oversize"
    assert config["transforms.toolkit_oversize.type"] == "kafkatoolkit.connect.OversizeRouter"
    assert config["transforms.toolkit_oversize.max.bytes"] == str(32 << 20)
    assert config["transforms.toolkit_oversize.topic"] == "big.oversize"
    assert config["transforms.toolkit_oversize.value.converter.schemas.enable"] == "false"
    assert (
        config["transforms.toolkit_oversize.key.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    )
    failing = ConnectorSpec.from_mapping({**base, "topics": {"oversize": "fail"}})
    assert failing.oversize_topic is None and not any(
        "toolkit_oversize" in v for v in failing.to_config().values()
    )
    with pytest.raises(SpecError, match=r"topics\.oversize 'skip' is not one of route, fail"):
        ConnectorSpec.from_mapping({**base, "topics": {"oversize": "skip"}})
    with pytest.raises(SpecError, match="spec fields manage"):
        ConnectorSpec.from_mapping({**base, "extra": {"transforms.toolkit_oversize.max.bytes": "1"}})


_BASE = {
    "name": "fmt",
    "database": {"hostname": "db", "user": "u", "dbname": "d"},
    "topic_prefix": "fmt",
    "tables": ["public.t"],
}
_JSON = "org.apache.kafka.connect.json.JsonConverter"


@pytest.mark.parametrize(("fmt", "inline"), [("json", "true"), ("json-schemaless", "false")])
def test_json_formats_render_json_converters_and_take_no_registry(fmt: str, inline: str) -> None:
    spec = ConnectorSpec.from_mapping({**_BASE, "format": fmt}, registry_url="http://r:8080")
    config = spec.to_config()
    for side in ("key", "value"):
        assert config[f"{side}.converter"] == _JSON and config[f"{side}.converter.schemas.enable"] == inline
    assert "schema.name.adjustment.mode" not in config
    assert spec.registry is None  # the caller's registry is for Avro specs only


@pytest.mark.parametrize("named", [{}, {"format": "avro"}])
def test_avro_is_the_default_and_a_spec_naming_no_registry_takes_the_callers(named: dict[str, str]) -> None:
    """The shell passes its registry endpoint (flag, env, default); SCHEMA_REGISTRY_URL is the
    Confluent-compatible API, cut back to the base for the converter's v2 API."""
    spec = ConnectorSpec.from_mapping({**_BASE, **named}, registry_url="http://r:8080/apis/ccompat/v7")
    assert spec.format == DEFAULT_FORMAT == "avro"
    assert spec.registry == RegistrySpec(url="http://r:8080/apis/ccompat/v7")
    config = spec.to_config()
    assert config["value.converter"] == config["key.converter"] == AVRO_CONVERTER
    assert config["value.converter.apicurio.registry.url"] == "http://r:8080/apis/registry/v2"


def test_a_specs_own_registry_wins_over_the_callers(tmp_path: Path) -> None:
    spec = ConnectorSpec.from_file(_write(tmp_path, "s.yaml", YAML), registry_url="http://elsewhere:1")
    assert spec.registry == RegistrySpec(url="http://apicurio:8080")
    fallback = ConnectorSpec.from_file(
        _write(tmp_path, "f.json", json.dumps(_BASE)), registry_url="http://r:8080"
    )
    assert fallback.registry == RegistrySpec(url="http://r:8080")


def test_an_avro_spec_with_no_registry_anywhere_is_refused_naming_every_way_out() -> None:
    with pytest.raises(SpecError) as info:
        ConnectorSpec.from_mapping(_BASE)  # no format, no registry, no fallback
    message = str(info.value)
    for way_out in ("format avro (the default) needs registry.url", "SCHEMA_REGISTRY_URL", "format: json"):
        assert way_out in message


def test_avro_renders_apicurio_converters_in_confluent_framing_for_keys_and_values() -> None:
    spec = ConnectorSpec.from_mapping(
        {**_BASE, "format": "avro", "registry": {"url": "http://apicurio:8080/apis/ccompat/v7"}}
    )
    config = spec.to_config()
    for side in ("key", "value"):
        assert config[f"{side}.converter"] == AVRO_CONVERTER
        assert {
            k.removeprefix(f"{side}.converter."): v
            for k, v in config.items()
            if k.startswith(f"{side}.converter.")
        } == {
            "apicurio.registry.url": "http://apicurio:8080/apis/registry/v2",
            "apicurio.registry.auto-register": "true",
            "apicurio.registry.as-confluent": "true",
            "apicurio.registry.use-id": "contentId",
            "apicurio.registry.headers.enabled": "false",
            "apicurio.registry.schema-resolver": SCHEMA_RESOLVER_CLASS,
        }
    assert config["schema.name.adjustment.mode"] == config["field.name.adjustment.mode"] == "avro"
    # The oversize router measures records with the same converters.
    assert config["transforms.toolkit_oversize.value.converter"] == AVRO_CONVERTER
    assert config["decimal.handling.mode"] == "string"  # the same value modes as JSON: same decoded values


def test_resolver_apicurio_leaves_the_converter_its_own_resolver_everywhere() -> None:
    """For a Connect cluster without the toolkit's resolver jar: no converter names it, the oversize
    router's copies included."""
    spec = ConnectorSpec.from_mapping(
        {**_BASE, "format": "avro", "registry": {"url": "http://r:8080", "resolver": "apicurio"}}
    )
    config = spec.to_config()
    assert not [k for k in config if k.endswith("schema-resolver")]
    assert config["transforms.toolkit_oversize.value.converter.apicurio.registry.use-id"] == "contentId"
    default = ConnectorSpec.from_mapping({**_BASE, "format": "avro", "registry": {"url": "http://r:8080"}})
    assert sorted(k for k, v in default.to_config().items() if v == SCHEMA_RESOLVER_CLASS) == sorted(
        f"{prefix}{side}.converter.apicurio.registry.schema-resolver"
        for prefix in ("", "transforms.toolkit_oversize.")
        for side in ("key", "value")
    )


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://r:8080", "http://r:8080"),
        ("http://r:8080/", "http://r:8080"),
        ("http://r:8080/apis/ccompat/v7", "http://r:8080"),
        ("https://r/apis/registry/v3", "https://r"),
    ],
)
def test_registry_url_is_cut_back_to_the_base(url: str, base: str) -> None:
    assert RegistrySpec(url=url).v2_api_url == f"{base}/apis/registry/v2"


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"format": "protobuf"}, "format 'protobuf' is not one of avro, json, json-schemaless"),
        ({"format": 3}, "format must be one of"),
        ({"format": "avro"}, r"format avro \(the default\) needs registry.url"),
        ({"format": "avro", "registry": {"url": "apicurio:8080"}}, "must be an http:// or https:// URL"),
        ({"registry": {"url": "apicurio:8080"}}, "must be an http:// or https:// URL"),
        ({"format": "avro", "registry": {"uri": "http://r"}}, r"unknown key\(s\) \['uri'\] in registry"),
        (
            {"format": "avro", "registry": {"url": "http://r", "resolver": "confluent"}},
            r"registry.resolver 'confluent' is not one of toolkit, apicurio \(toolkit, the default, needs",
        ),
        ({"format": "avro", "registry": {"url": "http://r", "resolver": 1}}, "registry.resolver must be str"),
        (
            {"format": "avro", "registry": {"url": "http://r"}, "extra": {"value.converter": _JSON}},
            r"extra sets \['value.converter'\], which format 'avro' manages",
        ),
        (
            {"format": "json-schemaless", "extra": {"key.converter.schemas.enable": "true"}},
            "which format 'json-schemaless' manages",
        ),
    ],
)
def test_bad_formats_are_refused_with_the_fix(over: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ConnectorSpec.from_mapping({**_BASE, **over})


def test_the_deprecated_schemaless_extra_still_works_with_format_json_and_is_refused_on_avro() -> None:
    """It predates `format`: on JSON (the old default) it still works; on Avro (the default now) it
    would fight the Avro converters, so the spec is refused, pointing at `format`."""
    schemaless = {**_BASE, "extra": dict(SCHEMALESS_JSON)}
    config = ConnectorSpec.from_mapping({**schemaless, "format": "json"}).to_config()
    assert config["value.converter.schemas.enable"] == "false"
    with pytest.raises(
        SpecError, match=r"which format 'avro' manages.*write `format: json` or `format: json-sch"
    ):
        ConnectorSpec.from_mapping(schemaless, registry_url="http://r:8080")


def test_replication_follows_the_cluster_unless_the_spec_names_it(tmp_path: Path) -> None:
    """Left out, Connect asks the broker for its default.replication.factor (-1): the same spec works
    on one broker and on three."""
    base = YAML.replace("topics: {partitions: 3, replication_factor: 2}\n", "")
    cluster = ConnectorSpec.from_file(_write(tmp_path, "c.yaml", base)).to_config()
    assert cluster["topic.creation.default.replication.factor"] == "-1"
    named = ConnectorSpec.from_file(_write(tmp_path, "n.yaml", YAML)).to_config()
    assert named["topic.creation.default.replication.factor"] == "2"
    for bad, message in (("0", "replication_factor must be >= 1"), ('"3"', "must be int | None")):
        text = base + f"topics: {{replication_factor: {bad}}}\n"
        with pytest.raises(SpecError, match=message):
            ConnectorSpec.from_file(_write(tmp_path, "bad.yaml", text))


def test_a_password_of_the_wrong_type_is_refused_without_echoing_it(tmp_path: Path) -> None:
    text = YAML.replace("password: s3cret", "password: 98765432")
    with pytest.raises(SpecError, match=r"database.password must be str, got a int \(quote it") as info:
        ConnectorSpec.from_file(_write(tmp_path, "p.yaml", text))
    assert "98765432" not in str(info.value)


def test_preflight_logs_in_with_the_connectors_tls_settings(tmp_path: Path) -> None:
    plain = ConnectorSpec.from_file(_write(tmp_path, "s.yaml", YAML))
    assert plain.preflight_conninfo() == plain.database.conninfo()  # libpq's default, as Debezium's
    tls = YAML.replace(
        "extra: {snapshot.fetch.size: 5000, skipped.operations: none}",
        "extra: {database.sslmode: verify-full, database.sslrootcert: /etc/ca.pem}",
    )
    spec = ConnectorSpec.from_file(_write(tmp_path, "t.yaml", tls))
    assert spec.preflight_conninfo() == {
        **spec.database.conninfo(),
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
    }


def test_preflight_can_log_in_where_this_machine_reaches_the_database(tmp_path: Path) -> None:
    """compose: the spec names postgres:5432 (Connect's view); pre-flight runs from the host."""
    spec = ConnectorSpec.from_file(_write(tmp_path, "s.yaml", YAML))
    here = spec.preflight_conninfo(at=("127.0.0.1", 55432))
    assert (here["host"], here["port"]) == ("127.0.0.1", 55432)
    assert {k: v for k, v in here.items() if k not in ("host", "port")} == {
        k: v for k, v in spec.database.conninfo().items() if k not in ("host", "port")
    }, "the login and the database stay the spec's"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:55432", ("127.0.0.1", 55432)), ("db.internal:5432", ("db.internal", 5432)),
     ("[::1]:5432", ("::1", 5432))],
)  # fmt: skip
def test_preflight_at_reads_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["postgres", "postgres:", ":5432", "host:99999", "host:port"])
def test_preflight_at_refuses_what_is_not_host_and_port(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--preflight-at .* is not HOST:PORT \(for example"):
        parse_address(text)
