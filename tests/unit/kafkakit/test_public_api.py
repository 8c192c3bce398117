"""The packages' public names: each one resolves to its defining object, and importing a package (or
one of its light submodules) loads no Kafka, HTTP, Avro, Postgres or YAML client."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kafkakit.exports import lazy_exports

PACKAGES = ("kafkakit", "cdc", "eventstore")
HEAVY = ("confluent_kafka", "httpx", "fastavro", "psycopg", "yaml", "rich")
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves_and_is_listed_by_dir(name: str) -> None:
    package = importlib.import_module(name)
    for public in package.__all__:
        value = getattr(package, public)
        assert value is not None, f"{name}.{public}"
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        package.nothing_here  # noqa: B018


def test_the_facade_and_the_entry_points_are_importable_from_their_packages() -> None:
    from cdc import ChangeEvent, ConnectClient, ConnectorSpec, decode_record
    from eventstore import Aggregate, CommandProcessor, DomainError, EventStore, EventStoreClient
    from eventstore import WrongExpectedVersion as Wrong
    from kafkakit import Endpoints, ToolkitError, parse_start

    assert EventStore.__module__ == "eventstore.store" and issubclass(Wrong, ToolkitError)
    assert issubclass(DomainError, ToolkitError)
    for entry in (Aggregate, CommandProcessor, EventStoreClient, EventStore):
        assert "Parameters:" in (entry.__doc__ or "") and ">>>" in (entry.__doc__ or ""), entry
    assert all((ChangeEvent, ConnectClient, ConnectorSpec, decode_record, Endpoints, parse_start))


@pytest.mark.parametrize("statement", [f"import {p}" for p in PACKAGES] + ["import cdc.values"])
def test_importing_a_package_loads_no_client_library(statement: str) -> None:
    probe = f"{statement}; import sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert loaded.stdout.strip() == ""


def test_a_lazy_map_that_disagrees_with_all_is_refused() -> None:
    module = types.ModuleType("fake_pkg")
    sys.modules["fake_pkg"] = module
    try:
        with pytest.raises(ValueError, match=r"disagree on \['Missing'\]"):
            lazy_exports("fake_pkg", ["Thing", "Missing"], {"json": ("Thing",)})
        getattr_, dir_ = lazy_exports("fake_pkg", ["dumps"], {"json": ("dumps",)})
        assert getattr_("dumps") is importlib.import_module("json").dumps
        assert module.dumps is getattr_("dumps") and "dumps" in dir_()
    finally:
        del sys.modules["fake_pkg"]


def test_the_materializers_api_imports_lightly_and_names_what_a_user_needs() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, materializers; light = 'pyspark' not in sys.modules and 'redis' not in sys.modules; "
        "from materializers import Materializer, View, DriverView, RunConfig, JobPlan, run, read_model; "
        "print(light, callable(run), isinstance(View, type))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]


def test_run_refuses_a_materializer_that_does_not_import_before_any_spark() -> None:
    import pytest

    from materializers import BadMaterializer, RunConfig, run

    with pytest.raises(BadMaterializer, match="cannot import module 'no_such_module'"):
        run("no_such_module:ORDERS", config=RunConfig())
