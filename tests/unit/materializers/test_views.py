"""User-defined materializers and views, checked before anything starts (no services): the View
protocol, the plan's list of views, module:attr and entry-point loading."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from materializers.catalog import ENTRY_POINT_GROUP, available, lookup
from materializers.config import RunConfig
from materializers.errors import BadMaterializer, BadView, UnknownMaterializer, UnknownView
from materializers.plan import JobPlan
from materializers.truth import Difference, Truth, compare
from materializers.view import DriverView, Reject, TableBatch, View, check_names, check_view
from shop.products import PRODUCTS


class ListView(DriverView):
    """A view of the test's own: each batch's (entity, position) pairs appended to a list."""

    def __init__(self, name: str = "pairs") -> None:
        self._name = name
        self.applied: list[tuple[str, str]] = []

    @property
    def name(self) -> str:
        return self._name

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position")

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        table = batch.table
        self.applied += zip(
            table.column("entity").to_pylist(), table.column("position").to_pylist(), strict=True
        )
        return ()

    def verify(self, truth: Truth) -> list[Difference]:
        return compare(self.name, {e: {} for e in truth.rows}, {e: {} for e, _ in self.applied})


class Incomplete:
    name = "half"

    def columns(self) -> tuple[str, ...]:
        return ()


def plan(**spec: Any) -> JobPlan:
    return JobPlan.of(replace(PRODUCTS, **spec), RunConfig(home=Path("/tmp/unused-home")))


def test_a_driver_view_implements_the_protocol() -> None:
    view = ListView()
    assert isinstance(view, View) and check_view(view, "m") is view
    assert view.collects(10**9) and view.in_driver(10**9) and not view.parallel


def test_a_view_missing_members_is_refused_naming_them() -> None:
    with pytest.raises(
        BadView, match=r"missing check, prepare, in_driver, .*verify, parallel \(a bool\)"
    ) as err:
        check_view(Incomplete(), "mine")
    assert "materializer 'mine'" in str(err.value) and "DriverView" in str(err.value)
    with pytest.raises(BadView, match=r"a class \(ListView\).*pass an instance"):
        check_view(ListView, "mine")


def test_two_views_with_one_name_are_refused() -> None:
    with pytest.raises(BadView, match=r"more than one view named 'pairs'.*give each view its own name"):
        check_names([ListView(), ListView()], "mine")
    with pytest.raises(BadView, match=r"named 'cache'.*builtin_views"):
        plan(views=(ListView("cache"),)).views()


def test_the_plan_builds_builtin_and_own_views_and_the_run_selects() -> None:
    made: list[JobPlan] = []

    def factory(job_plan: JobPlan) -> View:
        made.append(job_plan)
        return ListView("from_factory")

    full = plan(views=(ListView(), factory))
    assert [v.name for v in full.views()] == ["cache", "search", "warehouse", "pairs", "from_factory"]
    assert made == [full]  # a factory is called with the job's plan
    alone = JobPlan.of(full.spec, full.config.with_overrides(views="pairs,search"))
    assert [v.name for v in alone.views()] == ["search", "pairs"]
    assert [v.name for v in plan(builtin_views=(), views=(ListView(),)).views()] == ["pairs"]
    with pytest.raises(
        UnknownView, match=r"has no view 'elastic'; its views: cache, search, warehouse, pairs"
    ):
        JobPlan.of(full.spec, full.config.with_overrides(views="cache,elastic")).views()


def test_a_factory_that_fails_or_returns_no_view() -> None:
    def broken(_plan: JobPlan) -> View:
        raise KeyError("DSN")

    with pytest.raises(BadView, match=r"factory .*broken.* failed \(KeyError"):
        plan(views=(broken,)).views()
    with pytest.raises(BadView, match=r"does not implement"):
        plan(views=(lambda _plan: Incomplete(),)).views()
    with pytest.raises(BadView, match=r"missing"):
        plan(views=("cache",)).views()


USER_MODULE = """
from dataclasses import replace
from shop.products import PRODUCTS

GOOD = replace(PRODUCTS, name="mine")
NOT_ONE = {"name": "mine"}

class Half:
    name = "half"

BAD_VIEW = replace(PRODUCTS, name="bad_view", views=(Half(),))
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"user_mats_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    (tmp_path / "broken_mats.py").write_text("import no_such_package_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_module_attr_loads_a_materializer(user_module: str) -> None:
    assert lookup(f"{user_module}:GOOD").name == "mine"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module_xyz:GOOD", "cannot import module 'no_such_module_xyz'.*PYTHONPATH"),
        ("broken_mats:GOOD", "cannot import module 'broken_mats'.*no_such_package_anywhere"),
        ("{mod}:MISSING", "has no attribute 'MISSING'.*name the Materializer"),
        ("{mod}:NOT_ONE", "is a dict, not a materializers.materializer.Materializer"),
        ("{mod}:", "is not module:attr"),
    ],
)
def test_bad_module_attr(user_module: str, reference: str, message: str) -> None:
    with pytest.raises(BadMaterializer, match=message):
        lookup(reference.format(mod=user_module))


def test_a_materializer_whose_view_breaks_the_protocol_is_refused_at_load(user_module: str) -> None:
    with pytest.raises(BadView, match=r"materializer 'bad_view' does not implement.*missing columns"):
        lookup(f"{user_module}:BAD_VIEW")


def test_unknown_name_suggests_module_attr() -> None:
    with pytest.raises(UnknownMaterializer, match=r"installed: orders, products.*module:attr"):
        lookup("nope")


def test_entry_points_are_found_and_listed_with_their_origin(
    user_module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package's entry point, as pip would write it (a dist-info on sys.path)."""
    dist = tmp_path / "site" / "user_mats-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-mats\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(f"""
        [{ENTRY_POINT_GROUP}]
        mine = {user_module}:GOOD
        wrong_name = {user_module}:GOOD
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert lookup("mine").name == "mine"
    with pytest.raises(BadMaterializer, match=r"names materializer 'mine'; name the entry point after"):
        lookup("wrong_name")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nmine = {user_module}:GOOD\n")
    # sorted by name; the demo's shop comes through the same group as any user's package
    assert [(k.spec.name, k.origin) for k in available()] == [
        ("mine", f"entry point {user_module}:GOOD (user-mats)"),
        ("orders", "entry point shop.orders:ORDERS (kafka-toolkit-shop)"),
        ("products", "entry point shop.products:PRODUCTS (kafka-toolkit-shop)"),
        ("sku_per_minute", "entry point shop.sku_per_minute:SKU_PER_MINUTE (kafka-toolkit-shop)"),
    ]


def test_an_event_materializer_without_a_fold_cannot_be_verified() -> None:
    """Refused before Kafka is read: the toolkit knows no domain's fold of its own."""
    from materializers.ops.verify import verify

    events = plan(kind="events", sequential=True, builtin_views=("cache",), fold=None)
    with pytest.raises(BadMaterializer, match=r"has no fold.*Materializer\(fold=\.\.\.\)"):
        verify(events)


def test_one_name_declared_by_two_packages_is_refused_naming_both(
    user_module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never the first one found, silently: which package wins would depend on sys.path order."""
    for dist_name, attr in (("one", "GOOD"), ("two", "OTHER")):
        dist = tmp_path / "site" / f"{dist_name}-1.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nmine = {user_module}:{attr}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(
        BadMaterializer, match=r"'mine' is declared by more than one installed package \(.*in one.*in two"
    ) as info:
        lookup("mine")
    assert "module:attr" in str(info.value)


def test_split_refused_returns_the_error_rows_as_rejects_and_keeps_the_rest() -> None:
    import pyarrow as pa

    from materializers.view import split_refused

    rows = pa.table({
        "entity": ["1", "2", "3"], "src_topic": ["t", "t", "t"], "src_partition": [0, 1, 0],
        "src_offset": [5, 6, 7], "error": [None, "bad bytes", None],
    })  # fmt: skip
    rejects, kept = split_refused(rows)
    assert rejects == [("t", 1, 6, "bad bytes")]
    assert kept.column("entity").to_pylist() == ["1", "3"]
    assert split_refused(kept.drop_columns(["error"])) == ([], kept.drop_columns(["error"]))
    batch = rows.to_batches()[0]
    assert split_refused(batch)[0] == rejects
