"""The materializer factory's checks without services: how a driver process finds the materializer
(module:attr of an object, PYTHONPATH for a module imported from a test directory), and bad input
refused before any process starts."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from devstack.crash import ProcessGroups
from devstack.materializer_runs import MaterializerFactory, import_path, reference_of, resolve
from devstack.session import ConnectView, StackHandle
from kafkakit.settings import Endpoints
from materializers import BadMaterializer, BadView
from shop.products import PRODUCTS

# Bound at module level: the factory finds it here, as the driver process will import it.
MODULE_LEVEL = replace(PRODUCTS, name="module_level")


def test_an_object_is_named_by_the_module_level_name_bound_to_it() -> None:
    assert reference_of(MODULE_LEVEL) == f"{__name__}:MODULE_LEVEL"
    assert resolve(MODULE_LEVEL) == (f"{__name__}:MODULE_LEVEL", MODULE_LEVEL)
    assert resolve("products") == ("products", PRODUCTS)


def test_an_object_no_module_holds_is_refused_with_the_fix() -> None:
    local = replace(PRODUCTS, name="made_in_a_test")
    with pytest.raises(BadMaterializer, match=r"define it at module level .* or pass 'mypkg.views:NAME'"):
        resolve(local)
    with pytest.raises(BadMaterializer, match="pass a Materializer defined at module level"):
        resolve(42)  # type: ignore[arg-type]


def test_a_reference_that_does_not_load_names_the_cause_and_the_fix() -> None:
    with pytest.raises(BadMaterializer, match=r"cannot import module 'no_such_pkg.views'.*PYTHONPATH"):
        resolve("no_such_pkg.views:THING")
    with pytest.raises(BadMaterializer, match=r"is a int, not a materializers.materializer.Materializer"):
        resolve("os:F_OK")
    with pytest.raises(BadView, match=r"does not implement materializers.view.View"):
        resolve(f"{__name__}:WITH_A_BAD_VIEW")


WITH_A_BAD_VIEW = replace(PRODUCTS, name="bad_view", views=(object(),))  # type: ignore[arg-type]


def test_the_driver_gets_the_directory_a_test_module_was_imported_from() -> None:
    here = Path(__file__).resolve()
    depth = __name__.count(".") + 1
    root = str(here.parents[depth - 1])
    assert import_path(f"{__name__}:MODULE_LEVEL", "") == {"PYTHONPATH": root}
    assert import_path(f"{__name__}:MODULE_LEVEL", f"/elsewhere{os.pathsep}{root}") == {}
    assert import_path(f"{__name__}:MODULE_LEVEL", "/elsewhere") == {
        "PYTHONPATH": f"{root}{os.pathsep}/elsewhere"
    }
    assert import_path("json:dumps", "") == {}  # the standard library: found anyway
    assert import_path("products", "") == {}  # a name: the driver's own lookup


def test_start_refuses_bad_input_before_any_process_starts(tmp_path: Path) -> None:
    groups = ProcessGroups()
    handle = StackHandle(
        Endpoints(), "external", lambda _: None, lambda: None, ConnectView.same_as(Endpoints())
    )
    factory = MaterializerFactory(handle, groups, tmp_path)
    for bad in ("no_such_pkg:THING", "os:F_OK", replace(PRODUCTS, name="nowhere")):
        with pytest.raises(BadMaterializer):
            factory.start(bad)
    assert groups.started == [] and factory.made == [] and not any(tmp_path.iterdir())
