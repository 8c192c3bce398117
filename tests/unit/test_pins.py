"""One set of versions and settings everywhere: pyproject.toml's [tool.toolkit.pins], docker/compose.yaml,
containers.py. Compose runs the images `devstack images build` makes (their tags digest the pinned
artefacts); containers.py's official images (TOOLKIT_IMAGES=official) follow the pins by tag.

Each check is a pure function from the parsed files to a list of problems; every problem names the file to
fix. The real files must give none. `test_a_drifted_copy_is_caught` edits copies in tmp_path and expects
the matching problem, so a check that silently passes on drift fails here too.
"""

from __future__ import annotations

import re
import shlex
import shutil
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from devstack import containers, images
from devstack.pins import Pins
from kafkakit.settings import Endpoints

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
COMPOSE = REPO / "docker" / "compose.yaml"
FIX_COMPOSE = "fix docker/compose.yaml (or the pin in pyproject.toml [tool.toolkit.pins])"
FIX_PYPROJECT = "fix pyproject.toml"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

Doc = dict[str, Any]

# service in compose -> its image in devstack.images (compose calls the registry `apicurio`)
COMPOSE_SERVICES = {
    "postgres": "postgres", "kafka": "kafka", "connect": "connect", "redis": "redis",
    "apicurio": "registry", "opensearch": "opensearch",
}  # fmt: skip
# official image repository -> (pin name, "exact" tag or same "major" version)
OFFICIAL = {
    "postgres": ("postgres", "major"),
    "apache/kafka": ("kafka", "exact"),
    "quay.io/debezium/connect": ("debezium", "exact"),
    "redis": ("redis", "major"),
    "apicurio/apicurio-registry": ("apicurio", "exact"),
    "opensearchproject/opensearch": ("opensearch", "exact"),
}


def load_pyproject(path: Path = PYPROJECT) -> Doc:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def load_compose(path: Path = COMPOSE) -> Doc:
    doc: Doc = yaml.safe_load(path.read_text())
    return doc


def pins_of(pyproject: Doc) -> dict[str, str]:
    return {k: str(v) for k, v in pyproject["tool"]["toolkit"]["pins"].items()}


def split_image(ref: str) -> tuple[str, str | None]:
    name, sep, tag = ref.rpartition(":")
    return (name, tag) if sep and "/" not in tag else (ref, None)


def service(compose: Doc, name: str) -> Doc | None:
    found = (compose.get("services") or {}).get(name)
    return dict(found) if found is not None else None


def env_of(svc: Doc) -> dict[str, str]:
    raw = svc.get("environment") or {}
    pairs = dict(item.split("=", 1) for item in raw) if isinstance(raw, list) else raw
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in pairs.items()}


def command_of(svc: Doc) -> list[str]:
    cmd = svc.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def postgres_settings(tokens: list[str]) -> dict[str, str]:
    pairs = (tokens[i + 1] for i, tok in enumerate(tokens[:-1]) if tok == "-c")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def _mismatches(where: str, expected: dict[str, str], actual: dict[str, str], fix: str) -> list[str]:
    return [
        f"{where}: {key} is {actual.get(key)!r}, expected {want!r}; {fix}"
        for key, want in expected.items()
        if actual.get(key) != want
    ]


def check_built_images(pyproject: Doc, compose: Doc) -> list[str]:
    """Each service runs the image `devstack images build` names in its env file (its tag digests the
    pinned artefacts), and fails with the fix when the variable is unset."""
    problems = []
    for name, image_name in COMPOSE_SERVICES.items():
        variable = images.COMPOSE_VARIABLES[image_name]
        image = str((service(compose, name) or {}).get("image", ""))
        if not image.startswith(f"${{{variable}:?") or "devstack images build" not in image:
            problems.append(
                f"docker/compose.yaml: {name} runs {image!r}, not the built image "
                f'"${{{variable}:?... devstack images build ...}}"; {FIX_COMPOSE}'
            )
    return problems


def check_official_tags(pyproject: Doc, compose: Doc) -> list[str]:
    """TOOLKIT_IMAGES=official runs upstream images: their tags follow the pins."""
    pins, problems = pins_of(pyproject), []
    official = containers.Images.official(Pins(**pins))
    for ref in official.tags(frozenset({"opensearch"})):
        repository, tag = split_image(ref)
        pin_name, how = OFFICIAL[repository]
        pin, tag = pins[pin_name], tag or "latest"
        same = tag == pin if how == "exact" else tag.split(".")[0] == pin.split(".")[0]
        if tag == "latest" or not same:
            problems.append(
                f"containers.py: official image {ref} does not follow pin {pin_name} = {pin!r} ({how} tag, "
                "never `latest`); fix Images.official in docker/devstack/containers.py"
            )
    return problems


def check_postgres(pyproject: Doc, compose: Doc) -> list[str]:
    settings = postgres_settings(command_of(service(compose, "postgres") or {}))
    problems = [] if settings.get("wal_level") == "logical" else [
        f"docker/compose.yaml: postgres runs with wal_level={settings.get('wal_level')!r}; Debezium needs "
        "`-c wal_level=logical` in its command; fix docker/compose.yaml"
    ]  # fmt: skip
    for key in ("max_replication_slots", "max_wal_senders"):
        if int(settings.get(key, "0")) < 4:
            problems.append(
                f"docker/compose.yaml: postgres needs `-c {key}=N`, N >= 4; fix docker/compose.yaml"
            )
    return problems


def check_kafka(pyproject: Doc, compose: Doc) -> list[str]:
    one_broker = {
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_PROCESS_ROLES": "broker,controller",
    }
    fix = "a single KRaft broker needs these (else no groups, no transactions); fix docker/compose.yaml"
    return _mismatches("docker/compose.yaml kafka", one_broker, env_of(service(compose, "kafka") or {}), fix)


def check_connect(pyproject: Doc, compose: Doc) -> list[str]:
    wanted = {
        "KEY_CONVERTER": JSON_CONVERTER,
        "VALUE_CONVERTER": JSON_CONVERTER,
        "CONNECT_KEY_CONVERTER_SCHEMAS_ENABLE": "true",
        "CONNECT_VALUE_CONVERTER_SCHEMAS_ENABLE": "true",
        "CONNECT_TOPIC_CREATION_ENABLE": "true",
        "CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_OFFSET_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_STATUS_STORAGE_REPLICATION_FACTOR": "1",
    }
    env = env_of(service(compose, "connect") or {})
    fix = "the CDC decoders expect JSON with schemas, as the local stack writes; fix docker/compose.yaml"
    return _mismatches("docker/compose.yaml connect", wanted, env, fix)


def endpoint_ports() -> dict[str, int]:
    """The host ports of `Endpoints()` defaults, by compose service."""
    e = Endpoints()
    port = {name: urlsplit(url).port for name, url in {
        "postgres": e.pg_dsn, "connect": e.kafka_connect_url, "redis": e.redis_url,
        "apicurio": e.schema_registry_url, "kafka": f"//{e.kafka_bootstrap_servers}",
    }.items()}  # fmt: skip
    return {name: p for name, p in port.items() if p is not None}


def check_ports(pyproject: Doc, compose: Doc) -> list[str]:
    problems = []
    for repository, want in endpoint_ports().items():
        ports = [str(p) for p in (service(compose, repository) or {}).get("ports", [])]
        if not any(p.startswith(f"127.0.0.1:{want}:") for p in ports):
            problems.append(
                f"docker/compose.yaml: {repository} publishes {ports}, expected 127.0.0.1:{want}:<port> so "
                f"kafkakit.settings.Endpoints() defaults reach it; fix docker/compose.yaml"
            )
    return problems


def check_python_pins(pyproject: Doc, compose: Doc) -> list[str]:
    pins = pins_of(pyproject)
    deps = dict(d.split("==", 1) for d in pyproject["project"]["dependencies"] if "==" in d)
    return [
        f"pyproject.toml: [project.dependencies] pins {dist}=={deps.get(dist)} but [tool.toolkit.pins] "
        f"{pin} = {pins[pin]!r}; the JVM jars follow the pin, so make them equal; {FIX_PYPROJECT}"
        for dist, pin in (("pyspark", "spark"), ("delta-spark", "delta"))
        if deps.get(dist) != pins[pin]
    ]


def check_containers_module(pyproject: Doc, compose: Doc) -> list[str]:
    """docker/devstack/containers.py must configure the services as docker/compose.yaml does."""
    fix = "change docker/compose.yaml and docker/devstack/containers.py together"
    problems = []
    for name, expected in (
        ("kafka", containers.kafka_env()),
        ("connect", containers.connect_env()),
        ("apicurio", containers.registry_env()),
        ("opensearch", containers.opensearch_env()),
    ):
        env = env_of(service(compose, name) or {})
        problems += _mismatches(f"docker/compose.yaml {name} (vs containers.py)", expected, env, fix)
    for name, cmd in (("postgres", shlex.split(containers.PG_COMMAND)), ("redis", containers.REDIS_COMMAND)):
        if command_of(service(compose, name) or {}) != cmd:
            problems.append(f"docker/compose.yaml: {name} command differs from containers.py; {fix}")
    return problems


Check = Callable[[Doc, Doc], list[str]]  # (pyproject, compose) -> problems, each naming the file to fix
CHECKS: dict[str, Check] = {
    "compose runs the built images": check_built_images,
    "official images follow the pins": check_official_tags,
    "postgres decodes logically": check_postgres,
    "kafka fits one broker": check_kafka,
    "connect writes JSON with schemas": check_connect,
    "ports match Endpoints defaults": check_ports,
    "pyspark and delta-spark match the pins": check_python_pins,
    "containers.py matches compose": check_containers_module,
}


def all_problems(pyproject: Doc, compose: Doc) -> list[str]:
    return [problem for check in CHECKS.values() for problem in check(pyproject, compose)]


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_real_files_agree(name: str) -> None:
    problems = CHECKS[name](load_pyproject(), load_compose())
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- drift in edited copies

Edit = Callable[[dict[str, str], Doc], tuple[str, str]]  # (pins, compose) -> (old text, new text)


def _retag(name: str, ref: str) -> Edit:
    def edit(pins: dict[str, str], compose: Doc) -> tuple[str, str]:
        return f'image: "{(service(compose, name) or {})["image"]}"\n', f"image: {ref}\n"

    return edit


def _replace(old: str, new: str) -> Edit:
    return lambda pins, compose: (old, new)


def _pin(name: str, new: str) -> Edit:
    return lambda pins, compose: (f'{name} = "{pins[name]}"', f'{name} = "{new}"')


# case: (file edited, edit, text a problem must contain)
DRIFTS: dict[str, tuple[str, Edit, str]] = {
    "kafka from a registry": (
        "compose",
        _retag("kafka", "apache/kafka:4.3.1"),
        "kafka runs 'apache/kafka:4.3.1'",
    ),
    "redis latest": ("compose", _retag("redis", "redis:latest"), "redis runs 'redis:latest', not the built"),
    "opensearch": ("compose", _retag("opensearch", "opensearchproject/opensearch:2"), "not the built image"),
    "wal_level": ("compose", _replace("wal_level=logical", "wal_level=replica"), "wal_level='replica'"),
    "transaction RF": (
        "compose",
        _replace(
            'TRANSACTION_STATE_LOG_REPLICATION_FACTOR: "1"', 'TRANSACTION_STATE_LOG_REPLICATION_FACTOR: "3"'
        ),
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR is '3'",
    ),
    "schemas off": (
        "compose",
        _replace('VALUE_CONVERTER_SCHEMAS_ENABLE: "true"', 'VALUE_CONVERTER_SCHEMAS_ENABLE: "false"'),
        "CONNECT_VALUE_CONVERTER_SCHEMAS_ENABLE is 'false'",
    ),
    "kafka host port": (
        "compose",
        _replace('"127.0.0.1:19092:', '"127.0.0.1:29092:'),
        "expected 127.0.0.1:19092",
    ),
    "pyspark": (
        "pyproject",
        lambda pins, compose: (f'"pyspark=={pins["spark"]}"', '"pyspark==0.0.1"'),
        "pins pyspark==0.0.1",
    ),
    "delta pin": ("pyproject", _pin("delta", "0.0.1"), "delta = '0.0.1'"),
}


@pytest.mark.parametrize("case", sorted(DRIFTS))
def test_a_drifted_copy_is_caught(case: str, tmp_path: Path) -> None:
    target, edit, expected = DRIFTS[case]
    copies = {"pyproject": tmp_path / "pyproject.toml", "compose": tmp_path / "compose.yaml"}
    shutil.copy(PYPROJECT, copies["pyproject"])
    shutil.copy(COMPOSE, copies["compose"])
    old, new = edit(pins_of(load_pyproject()), load_compose())
    text = copies[target].read_text()
    assert text.count(old) == 1, (
        f"drift case {case!r} no longer applies: {old!r} is not in {target} exactly once"
    )
    copies[target].write_text(text.replace(old, new))

    problems = all_problems(load_pyproject(copies["pyproject"]), load_compose(copies["compose"]))

    hits = [p for p in problems if expected in p]
    assert hits, f"drift {case!r} went unnoticed; problems were: {problems}"
    assert all("fix" in p or "change" in p for p in hits), f"a message does not say what to fix: {hits}"


# ---------------------------------------------------------------- containers.py without an engine


def test_docker_engine_available_answers_a_bool_quickly() -> None:
    started = time.monotonic()
    answer = containers.docker_engine_available(timeout_s=2.0)
    assert isinstance(answer, bool)
    assert time.monotonic() - started < 6.0, "docker_engine_available must not hang without an engine"


def test_container_images_come_from_the_pins() -> None:
    pins = pins_of(load_pyproject())
    images = containers.Images.official(Pins.load())
    assert images.kafka == f"apache/kafka:{pins['kafka']}", (
        "fix Images.official in docker/devstack/containers.py"
    )
    assert images.connect == f"quay.io/debezium/connect:{pins['debezium']}"
    assert images.registry == f"apicurio/apicurio-registry:{pins['apicurio']}"
    assert images.opensearch == f"opensearchproject/opensearch:{pins['opensearch']}"


@pytest.mark.parametrize(
    ("folder", "property_", "pin"),
    [
        ("oversize-router", "kafka.version", "kafka"),
        ("schema-resolver", "apicurio.version", "apicurio_converter"),
    ],
)
def test_the_connect_plugins_build_against_the_pins(folder: str, property_: str, pin: str) -> None:
    # devstack passes -D<property>; the pom's own default is what `make connect-plugin` builds with.
    pom = (REPO / "connect-plugins" / folder / "pom.xml").read_text()
    match = re.search(rf"<{re.escape(property_)}>([^<]+)</{re.escape(property_)}>", pom)
    assert match is not None and match[1] == load_pyproject()["tool"]["toolkit"]["pins"][pin], (
        f"fix <{property_}> in connect-plugins/{folder}/pom.xml to the {pin} pin"
    )


def test_an_installed_toolkit_reads_the_same_pins_from_its_package(tmp_path: Path) -> None:
    """A wheel has no pyproject.toml: `Pins.load` reads docker/devstack/pins.json, which must equal the table."""
    import json

    from devstack.pins import PACKAGE_COPY

    table = pins_of(load_pyproject())
    assert json.loads(PACKAGE_COPY.read_text()) == table, (
        f"fix docker/devstack/pins.json to pyproject.toml's [tool.toolkit.pins]: {json.dumps(table, indent=2)}"
    )
    assert Pins.load(tmp_path / "pyproject.toml") == Pins.load()  # no pyproject.toml there: the package copy
