"""What only the OpenSearch backend has, on a real node: versions and tombstones kept by OpenSearch
itself, bad input named before a job starts, `verify`, `materializers search` on either backend, and
a rebuild's alias switch that readers never see as a missing index."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import run_once, wait_for_end_offset
from records import debezium, produce
from search_backends import BACKENDS, SearchBackend, require_opensearch

from materializers.catalog import lookup
from materializers.cli import main
from materializers.decode import positions
from materializers.errors import MappingConflict
from materializers.ops import generations
from materializers.ops.rebuild import retire
from materializers.ops.verify import verify
from materializers.plan import JobPlan
from materializers.truth import Truth
from materializers.views.search.opensearch import OpenSearchIndex, OpenSearchView

pytestmark = pytest.mark.integration

PRODUCTS = lookup("products")
COLUMNS = PRODUCTS.data_columns
TABLE_DDL = (
    "id integer primary key, name text not null, description text, price numeric(12,2) not null, "
    "stock integer not null default 0"
)


@pytest.fixture
def index(uid: str) -> Any:
    url = require_opensearch()
    found = OpenSearchIndex(
        url=url,
        alias=f"mat-os-{uid}",
        index=f"mat-os-{uid}-g0",
        search_fields=PRODUCTS.search_fields,
        data_columns=COLUMNS,
    )
    yield found
    found.client().indices.delete(index=f"mat-os-{uid}-*", ignore_unavailable=True)


def change(entity: str, lsn: int, op: str = "upsert", name: str = "") -> dict[str, Any]:
    values = {"name": name, "description": f"{name} desc", "price": "1.00", "stock": 1}
    return {
        "entity": entity,
        "position": positions.cdc(lsn, snapshot=False),
        "op": op,
        "keep_fields": [],
        "src_topic": "t",
        "src_partition": 0,
        "src_offset": lsn,
        **{c: None if op == "delete" else values[c] for c in COLUMNS},
    }


def stored(index: OpenSearchIndex, entity: str) -> tuple[int, dict[str, Any]]:
    doc = index.client().get(index=index.index, id=entity)
    return doc["_version"], doc["_source"]


def test_opensearch_keeps_versions_and_tombstones_itself(index: OpenSearchIndex) -> None:
    index.ensure()
    health = index.client().cluster.health(index=index.index)
    assert health["status"] == "green", "one node: the index must get 0 replicas, not a hard-coded 1"
    assert index.apply_rows([change("1", 300, name="walnut")]) == []
    assert stored(index, "1")[0] == 3001  # the position is the document's external version
    assert index.apply_rows([change("1", 200, name="pine")]) == []  # refused by version: not an error
    version, source = stored(index, "1")
    assert (version, source["name"]) == (3001, "walnut")
    assert index.apply_rows([change("1", 500, "delete")]) == []
    assert stored(index, "1") == (
        5001,
        {"entity": "1", "position": positions.cdc(500, snapshot=False), "deleted": True},
    )
    assert index.apply_rows([change("1", 400, name="back")]) == []  # an older upsert cannot resurrect it
    assert index.read("1") is None
    index.apply_rows([change("2", 100, name="oak")])
    index.refresh()
    assert index.search("walnut back oak") == ["2"]  # tombstones are never found

    truth = {"2": {"name": "oak", "description": "oak desc", "price": "1.00", "stock": "1"}}
    view = OpenSearchView(index)
    assert view.verify(Truth(kind="cdc", rows=truth)) == []
    differences = view.verify(Truth(kind="cdc", rows={**truth, "3": {"name": "missing"}}))
    assert len(differences) == 1 and "3" in str(differences[0])


def test_a_mapping_that_cannot_hold_a_column_is_refused_by_name(index: OpenSearchIndex) -> None:
    index.client().indices.create(
        index=index.index, body={"mappings": {"properties": {"price": {"type": "long"}}}}
    )
    with pytest.raises(MappingConflict, match="price: mapped as long, needs keyword"):
        index.check()


def test_a_document_opensearch_refuses_comes_back_as_a_reject_with_its_offset(
    index: OpenSearchIndex,
) -> None:
    """A per-document refusal (here: a field mapped as a number elsewhere) is the document's fault:
    it goes to the dead letters with its source coordinates, and the rest of the batch is applied."""
    index.client().indices.create(
        index=index.index, body={"mappings": {"properties": {"name": {"type": "integer"}}}}
    )
    rejects = index.apply_rows([change("1", 100, name="walnut"), change("2", 110, name="42")])
    assert [(r[:3]) for r in rejects] == [("t", 0, 100)]
    assert "mapper_parsing_exception" in rejects[0][3]
    assert index.read("2") is not None


def test_opensearch_down_fails_before_the_job_starts(
    cli_env: Path, topics: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = topics("mat-os-bad")
    flags = ["--search-backend", "opensearch", "--opensearch-url", "http://127.0.0.1:9"]
    assert main([*flags, "start", "products", "--topic", topic, "--from", "earliest"]) == 2
    err = capsys.readouterr().err
    assert "OpenSearch at http://127.0.0.1:9 does not answer" in err
    assert "OPENSEARCH_URL" in err and "--search-backend tantivy" in err
    assert not (cli_env / "products" / "checkpoint").exists()  # nothing started


@pytest.mark.parametrize("name", BACKENDS)
def test_materializers_search_answers_from_either_backend(
    name: str, spark: Any, topics: Any, producer: Any, run_config: Any, cli_env: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    backend = SearchBackend(name, require_opensearch() if name == "opensearch" else None)
    topic = topics("mat-os-search")
    config = run_config(topic=topic, views="search", **backend.overrides())  # home: cli_env's
    plan = JobPlan.of(PRODUCTS, config)
    produce(producer, topic, [debezium(7, 100, "c", {"name": "velvet chair", "price": "1.00", "stock": 1})])
    try:
        run_once(spark, plan)
        backend.store(plan)  # makes what was written visible (OpenSearch: refresh)
        argv = [*backend.cli_flags(), "search", "products", "velvet", "--redis-prefix", config.redis_prefix]
        assert main(argv) == 0
        out = capsys.readouterr()
        assert out.out.split() == ["7"]
        assert f"1 hit(s) from {'OpenSearch' if name == 'opensearch' else 'Tantivy'}" in out.err
    finally:
        backend.drop(plan)


def test_a_rebuild_switches_the_alias_and_readers_never_miss_the_index(run_config: Any, uid: str) -> None:
    url = require_opensearch()
    config = run_config(search_backend="opensearch", opensearch_url=url)
    old, new = JobPlan.of(PRODUCTS, config), JobPlan.of(PRODUCTS, config, "g1")
    first, second = old.opensearch(), new.opensearch()
    assert first is not None and second is not None and first.alias == second.alias
    try:
        first.ensure()
        first.apply_rows([change("1", 100, name="original")])
        second.ensure()  # the alias already has an index: it stays on the live one
        second.apply_rows([change("1", 100, name="rebuilt")])
        first.refresh(), second.refresh()
        assert first.search("original") == ["1"] and first.search("rebuilt") == []

        failures: list[str] = []
        answers: set[str] = set()
        stop = threading.Event()

        def reader() -> None:  # searches the alias over and over while it moves
            while not stop.is_set():
                try:
                    answers.update(first.search("original rebuilt"))
                    reply = first.client().search(index=first.alias, body={"size": 1})
                    if reply["hits"]["total"]["value"] != 1:
                        failures.append(f"{reply['hits']['total']} documents behind the alias")
                except Exception as exc:
                    failures.append(repr(exc))

        thread = threading.Thread(target=reader)
        thread.start()
        generations.switch(new)
        stop.set()
        thread.join(10)
        assert failures == [] and answers == {"1"}
        assert first.search("rebuilt") == ["1"]  # the readers' alias now serves generation g1
        assert generations.live_generation(new.job_dir) == "g1"
        retire(old)
        assert not first.client().indices.exists(index=first.index)
        assert first.search("rebuilt") == ["1"]
    finally:
        second.client().indices.delete(index=f"{second.alias}-*", ignore_unavailable=True)


def test_verify_compares_the_documents_with_the_source_table(
    spark: Any, cdc_source: Any, run_config: Any, producer: Any, endpoints: Any
) -> None:
    """A real Debezium source beside the cache: `verify` finds no difference, then finds the one
    made behind the view's back; a poison record goes to the dead letters, the rest is applied."""
    url = require_opensearch()
    source = cdc_source(TABLE_DDL)
    for i in range(1, 4):
        source.pg.execute(
            f"INSERT INTO {source.table} VALUES (%s, %s, %s, %s, %s)",  # type: ignore[arg-type]
            (i, f"widget {i}", f"a sturdy widget number {i}", f"{i}.50", i),
        )
    source.start()
    source.pg.execute(f"DELETE FROM {source.table} WHERE id = 2")  # type: ignore[arg-type]
    wait_for_end_offset(endpoints, source.topic, 3 + 2)
    producer.produce(source.topic, key=b'{"payload":{"id":9}}', value=b"\x00not json")
    producer.flush()
    config = run_config(
        topic=source.topic, table=f"public.{source.table}", views="cache,search",
        search_backend="opensearch", opensearch_url=url,
    )  # fmt: skip
    plan = JobPlan.of(PRODUCTS, config)
    remote = plan.opensearch()
    assert remote is not None
    try:
        job = run_once(spark, plan)
        assert job.dead_letters == 1
        assert [str(d) for d in verify(plan)] == []
        # Tampered with at a far higher version (no change will ever overwrite it): verify says so.
        body = {"entity": "3", "position": "9" * 18, "deleted": False, "name": "tampered"}
        remote.client().index(
            index=remote.index, id="3", body=body, params={"version": 10**18, "version_type": "external"}
        )
        differences = [str(d) for d in verify(plan)]
        assert len(differences) == 1 and "search" in differences[0] and "3" in differences[0]
    finally:
        remote.client().indices.delete(index=f"{remote.alias}-*", ignore_unavailable=True)
