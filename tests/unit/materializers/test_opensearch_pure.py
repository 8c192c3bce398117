"""The OpenSearch search view's functional core, without a server: folding a batch, TOAST fill,
external versions, the mapping from the spec, and how bulk replies are read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkakit.errors import ConfigError
from materializers.config import RunConfig
from materializers.decode import positions
from materializers.views.read_model import batch_rows
from materializers.views.search.opensearch import (
    MAX_VERSION,
    alias_name,
    bulk_doc,
    conflicts,
    document,
    mappings,
    needs_stored,
    newest_docs,
    sources,
    version_of,
    whole_changes,
)
from materializers.views.search.opensearch_bulk import outcome

COLUMNS = ("name", "description", "price")


def change(entity: str, lsn: int, op: str = "upsert", keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A change row as the job hands it over; a delete carries no data, a kept column is null."""
    gone = op == "delete"
    return {
        "entity": entity,
        "position": positions.cdc(lsn, snapshot=False),
        "op": op,
        "keep_fields": list(keep),
        "src_topic": "t",
        "src_partition": 0,
        "src_offset": lsn,
        **{c: None if gone or c in keep else f"{c}@{lsn}" for c in COLUMNS},
    }


def test_a_position_is_the_external_version_and_must_fit_a_long() -> None:
    assert version_of(positions.cdc(123, snapshot=False)) == 1231
    assert version_of(positions.encode(7)) == 7
    with pytest.raises(ValueError, match="beyond"):
        version_of(str(MAX_VERSION + 1))


def test_the_batch_folds_to_each_entitys_newest_change() -> None:
    rows = [change("1", 10), change("1", 30), change("1", 20), change("2", 5, "delete")]
    one, two = batch_rows(rows, COLUMNS)
    assert (one.key, one.position, one.values["name"]) == ("1", positions.cdc(30, snapshot=False), "name@30")
    assert sources(rows)["1"] == ("t", 0, 30)  # a reject of entity 1's document points at offset 30
    assert two.deleted and not needs_stored(two, COLUMNS) and not needs_stored(one, COLUMNS)


def test_a_kept_toast_column_takes_the_newest_carried_value_or_the_stored_one() -> None:
    [doc] = batch_rows([change("1", 10), change("1", 20, keep=("description",))], COLUMNS)
    assert needs_stored(doc, COLUMNS)  # the newest change did not carry description itself
    # stored older than the batch's carrier: the batch's value (carried at 10) wins
    older = {"position": positions.cdc(5, snapshot=False), "description": "stored"}
    assert document(doc, older, COLUMNS)["description"] == "description@10"
    # stored newer than the carrier (a late record carried it): the stored value stays
    newer = {"position": positions.cdc(15, snapshot=False), "description": "stored"}
    assert document(doc, newer, COLUMNS)["description"] == "stored"

    [alone] = batch_rows([change("1", 20, keep=("description",))], COLUMNS)
    assert document(alone, newer, COLUMNS)["description"] == "stored"
    assert "description" not in document(alone, None, COLUMNS)  # nothing stored, nothing carried


def test_a_delete_is_a_tombstone_at_its_position() -> None:
    [doc] = batch_rows([change("9", 40, "delete")], COLUMNS)
    body = document(doc, {"position": "0", "name": "old"}, COLUMNS)
    assert body == {"entity": "9", "position": positions.cdc(40, snapshot=False), "deleted": True}
    entity, lines = bulk_doc("idx", doc, body)
    meta, source = (json.loads(line) for line in lines.decode().splitlines())
    assert entity == "9" and meta == {
        "index": {"_index": "idx", "_id": "9", "version": 401, "version_type": "external"}
    }
    assert source == body


def columns_of(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {name: [r[name] for r in rows] for name in rows[0]}


def test_a_batch_of_whole_changes_encodes_from_its_columns_what_the_general_path_encodes() -> None:
    rows = [change("1", 10), change("2", 15), change("1", 30), change("1", 20), change("2", 25, "delete")]
    rows += [{**change("3", 40), "price": 12, "description": None}]  # a number as text, a null left out
    assert whole_changes(columns_of(rows))
    docs, refused = newest_docs("idx", columns_of(rows), COLUMNS)
    general = [bulk_doc("idx", r, document(r, None, COLUMNS)) for r in batch_rows(rows, COLUMNS)]
    assert refused == [] and sorted(docs) == sorted(general) and len(docs) == 3
    assert json.loads(dict(docs)["3"].splitlines()[1]) == {
        "entity": "3", "position": positions.cdc(40, snapshot=False), "deleted": False,
        "name": "name@40", "price": "12",
    }  # fmt: skip


def test_a_batch_with_a_kept_column_is_not_whole_and_an_unfit_position_is_refused() -> None:
    assert not whole_changes(columns_of([change("1", 10), change("1", 20, keep=("description",))]))
    rows = [change("1", 10), {**change("2", 20), "position": str(MAX_VERSION + 1)}]
    docs, refused = newest_docs("idx", columns_of(rows), COLUMNS)
    assert [entity for entity, _ in docs] == ["1"]
    assert refused == [("2", f"position {MAX_VERSION + 1} does not fit OpenSearch's version")]


def test_the_mapping_analyses_search_fields_and_keeps_the_rest_exact() -> None:
    mapping = mappings(("name", "description"), COLUMNS)
    props = mapping["properties"]
    assert props["name"]["type"] == props["description"]["type"] == "text"
    assert props["price"]["type"] == props["entity"]["type"] == "keyword"
    assert props["deleted"]["type"] == "boolean"
    assert mapping["dynamic"] == "strict"


def test_a_conflicting_existing_mapping_is_named_by_column() -> None:
    wanted = mappings(("name",), COLUMNS)
    found = {"properties": {"name": {"type": "text"}, "price": {"type": "long"}}}
    assert conflicts(wanted, found) == ["price: mapped as long, needs keyword"]
    assert conflicts(wanted, {}) == []


@pytest.mark.parametrize(
    ("status", "kind"), [(201, "ok"), (409, "stale"), (400, "reject"), (429, "retry"), (503, "fail")]
)
def test_bulk_reply_items_are_classified(status: int, kind: str) -> None:
    error = None if status < 300 else {"type": "x", "reason": "y"}
    assert outcome({"index": {"_id": "1", "status": status, "error": error}})[0] == kind


def test_the_backend_is_chosen_by_flag_over_env_over_default() -> None:
    assert RunConfig.from_env({}).search_backend == "tantivy"
    env = RunConfig.from_env({"MATERIALIZERS_SEARCH_BACKEND": "opensearch", "OPENSEARCH_URL": "http://h:1"})
    assert (env.search_backend, env.opensearch_url) == ("opensearch", "http://h:1")
    assert env.with_overrides(search_backend="tantivy").search_backend == "tantivy"
    with pytest.raises(ConfigError, match="tantivy or opensearch"):
        RunConfig.from_env({"MATERIALIZERS_SEARCH_BACKEND": "solr"})
    assert RunConfig.from_env({"MATERIALIZERS_OPENSEARCH_REPLICAS": "2"}).opensearch_replicas == 2


def test_the_alias_is_a_valid_index_name() -> None:
    assert alias_name("mat", "products") == "mat-products"
    assert alias_name("Team:A", "Orders by day") == "team-a-orders-by-day"
