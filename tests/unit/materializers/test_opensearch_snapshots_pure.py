"""OpenSearch snapshots of the search view, without a node: names, path.repo and a snapshot's
completeness (pure). A snapshot refused by the other backend: test_snapshots_pure.py."""

from __future__ import annotations

from materializers.views.search.opensearch_snapshots import holds, repo_roots, snapshot_name


def test_the_snapshot_is_named_after_the_index_and_the_toolkits_snapshot_in_lowercase() -> None:
    assert (
        snapshot_name("mat-products-g0", "20261127T170000-ab12cd") == "mat-products-g0-20261127t170000-ab12cd"
    )


def test_path_repo_is_read_from_every_node_as_a_list_or_a_string() -> None:
    reply = {
        "nodes": {
            "a": {"settings": {"path": {"repo": ["/snap", "/other"]}}},
            "b": {"settings": {"path": {"repo": "/snap"}}},
            "c": {"settings": {"path": {"data": ["/d"]}}},
        }
    }
    assert repo_roots(reply) == ["/snap", "/other"]
    assert repo_roots({"nodes": {"a": {"settings": {}}}}) == []


def test_only_a_complete_snapshot_holding_the_index_can_be_restored() -> None:
    done = {"snapshots": [{"state": "SUCCESS", "indices": ["mat-products-g0"]}]}
    assert holds(done, "mat-products-g0")
    assert not holds(done, "mat-products-g1")
    assert not holds({"snapshots": [{"state": "PARTIAL", "indices": ["mat-products-g0"]}]}, "mat-products-g0")
    assert not holds({}, "mat-products-g0")
