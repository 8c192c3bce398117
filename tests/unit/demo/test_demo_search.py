"""The demo's search backend choice: DEMO_SEARCH picks it, it reaches the driver's command line and
the plans, OpenSearch's address comes from the stack, and a silent node is refused up front."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.run import DemoConfig, driver_args, stack_config
from demo.search import SearchChoice, SearchReader, backend_from_env, stack_opensearch_url
from materializers import SearchBackendUnavailable
from materializers.cli import _parser
from materializers.config import RunConfig
from materializers.plan import JobPlan
from shop.orders import ORDERS
from shop.products import PRODUCTS


def test_the_default_demo_keeps_tantivy_and_demo_search_picks_opensearch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEMO_SEARCH", raising=False)
    assert DemoConfig.from_args([]).search == "tantivy"
    monkeypatch.setenv("DEMO_SEARCH", "opensearch")
    assert DemoConfig.from_args([]).search == "opensearch"
    assert DemoConfig.from_args(["--search", "tantivy"]).search == "tantivy"  # the flag over the env
    assert backend_from_env({"DEMO_SEARCH": ""}) == "tantivy"


def test_an_unknown_backend_is_refused_naming_the_choices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DEMO_SEARCH", "elastic")
    with pytest.raises(SystemExit):
        DemoConfig.from_args([])
    assert "tantivy or opensearch" in capsys.readouterr().err


def plans(tmp_path: Path, choice: SearchChoice) -> list[JobPlan]:
    base = RunConfig(home=tmp_path, redis_prefix="demoab12").with_overrides(**choice.run_overrides())
    products = base.with_overrides(topic="demoab12.shop_ab12.products", table="shop_ab12.products")
    return [JobPlan.of(PRODUCTS, products), JobPlan.of(ORDERS, base.with_overrides(topic="demo-ab12.events"))]


def test_the_driver_is_started_with_the_backend_and_the_stacks_opensearch_url(tmp_path: Path) -> None:
    choice = SearchChoice(backend="opensearch", opensearch_url="http://127.0.0.1:29200")
    args = driver_args(plans(tmp_path, choice), choice)
    parsed = _parser().parse_args(args[3:])  # after `python -m materializers.cli`
    assert (parsed.command, parsed.names) == ("start", ["products", "orders"])
    assert (parsed.search_backend, parsed.opensearch_url) == ("opensearch", "http://127.0.0.1:29200")
    default = driver_args(plans(tmp_path, SearchChoice()), SearchChoice())
    assert _parser().parse_args(default[3:]).search_backend == "tantivy"
    assert "--opensearch-url" not in default


def test_the_plans_search_view_lives_in_the_chosen_backend_and_says_which(tmp_path: Path) -> None:
    remote = plans(tmp_path, SearchChoice(backend="opensearch", opensearch_url="http://h:1"))[0]
    found = remote.opensearch()
    assert found is not None and remote.search() is None
    assert (found.url, found.alias, found.index) == (
        "http://h:1",
        "demoab12-products",
        "demoab12-products-g0",
    )
    assert SearchReader(remote).label == "OpenSearch"
    local = plans(tmp_path, SearchChoice())[0]
    assert local.opensearch() is None and SearchReader(local).label == "Tantivy"
    with pytest.raises(ValueError, match="keeps no search view"):
        SearchReader(plans(tmp_path, SearchChoice())[1])  # orders names no search fields


def test_the_opensearch_url_comes_from_the_environment_else_the_stacks_env_file(tmp_path: Path) -> None:
    (tmp_path / "env").write_text("export OPENSEARCH_URL=http://127.0.0.1:29201\n")
    assert stack_opensearch_url({"STACK_DIR": str(tmp_path)}) == "http://127.0.0.1:29201"
    env = {"STACK_DIR": str(tmp_path), "OPENSEARCH_URL": "http://os:9200"}
    assert stack_opensearch_url(env) == "http://os:9200"
    assert stack_opensearch_url({"STACK_DIR": str(tmp_path / "none")}) == ""


def test_a_silent_opensearch_is_refused_before_anything_starts_naming_the_fix() -> None:
    SearchChoice().require()  # Tantivy: nothing to reach
    with pytest.raises(SearchBackendUnavailable, match="STACK_OPENSEARCH=1") as refused:
        SearchChoice(backend="opensearch", opensearch_url="http://127.0.0.1:9").require()
    assert "unset DEMO_SEARCH" in str(refused.value)
    with pytest.raises(SearchBackendUnavailable, match="no OPENSEARCH_URL"):
        SearchChoice(backend="opensearch").require()


def test_the_demo_asks_the_stack_for_opensearch_only_when_its_search_lives_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STACK_OPENSEARCH", raising=False)
    assert "opensearch" in stack_config(DemoConfig(search="opensearch")).optional
    assert "opensearch" not in stack_config(DemoConfig()).optional
