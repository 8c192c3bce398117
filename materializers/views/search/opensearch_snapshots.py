"""Snapshots of the OpenSearch search view through OpenSearch's own snapshot API, for
`materializers snapshot` / `restore` (snapshots.py): the index is restored to exactly what it held
when the job's other views were copied, external versions and tombstones included, so the replay from
the snapshot's offsets rewrites every later change (the versions refuse nothing it needs).

Why not leave the index as it is on restore: it would be ahead of the restored offsets, and an index
that is ahead converges by versions only where it is right. A document written wrong at a high
version (the reason to restore), or an index lost with its node, would stay wrong or missing: the
replay's older versions are refused, and the changes before the snapshot are never replayed.

Repository: the one named `materializers` (`REPOSITORY`). Register your own under that name (s3, or
`fs` on a path every node shares); where none is registered and the nodes set `path.repo` (the local
stack's node does), an `fs` repository is registered at `<path.repo>/materializers`.
Snapshot `<index>-<snapshot id>`: this generation's index only, without the cluster's global state.

Restore order (the job is stopped; readers search the alias throughout and never find it missing):
1. the snapshot's index is restored beside the live one, as `<index>-restoring`;
2. the alias moves to it in one `_aliases` request: readers now see the snapshot's documents;
3. the live index is deleted and restored from the snapshot under its own name (the name the job
   writes to);
4. the alias moves back to it in one request, and `<index>-restoring` is deleted.
A crash in between leaves the alias on a complete index; running the same restore again completes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from materializers.errors import SearchBackendUnavailable, SnapshotNotFound
from materializers.views.search.opensearch import OpenSearchIndex

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

REPOSITORY = "materializers"
STAGING_SUFFIX = "-restoring"
# A snapshot or restore waits for completion in one request: its duration grows with the index, so the
# client's own timeout (30 s) would give up on a large one that is still running fine.
WAIT_S = 3600


class SnapshotRepositoryUnavailable(SearchBackendUnavailable):
    """No snapshot repository can hold the index's snapshot (none registered, no path.repo)."""


# ---------------------------------------------------------------- pure core


def snapshot_name(index: str, snap_id: str) -> str:
    """The OpenSearch snapshot of `index` for the toolkit's snapshot `snap_id` (pure): lowercase,
    as OpenSearch requires."""
    return f"{index}-{snap_id}".lower()


def repo_roots(nodes_info: Mapping[str, Any]) -> list[str]:
    """Every node's `path.repo` entries from a `GET _nodes/settings` reply, first node first (pure)."""
    roots: list[str] = []
    for node in nodes_info.get("nodes", {}).values():
        held = node.get("settings", {}).get("path", {}).get("repo", [])
        roots += [held] if isinstance(held, str) else list(held)
    return list(dict.fromkeys(roots))


def holds(reply: Mapping[str, Any], index: str) -> bool:
    """Whether a `GET _snapshot/<repo>/<name>` reply is a complete snapshot holding `index` (pure)."""
    found = reply.get("snapshots", [])
    return bool(found) and found[0].get("state") == "SUCCESS" and index in found[0].get("indices", [])


# ---------------------------------------------------------------- shell


def _unavailable(index: OpenSearchIndex, what: str, exc: Exception) -> SearchBackendUnavailable:
    return SearchBackendUnavailable(
        f"OpenSearch at {index.url} failed to {what} ({type(exc).__name__}: {str(exc)[:300]}); check the "
        "cluster's health and the repository's disk, then run the same command again"
    )


def ensure_repository(index: OpenSearchIndex, client: OpenSearch) -> None:
    """The `materializers` repository exists, registered here under the nodes' path.repo if need be."""
    from opensearchpy.exceptions import NotFoundError, OpenSearchException

    try:
        client.snapshot.get_repository(repository=REPOSITORY)
        return
    except NotFoundError:
        pass
    except OpenSearchException as exc:
        raise _unavailable(index, f"read the snapshot repository {REPOSITORY!r}", exc) from exc
    try:
        roots = repo_roots(client.nodes.info(metric="settings"))
        if not roots:
            raise SnapshotRepositoryUnavailable(
                f"OpenSearch at {index.url} has no snapshot repository {REPOSITORY!r} and its nodes set no "
                f"path.repo, so none can be registered: register one under that name (`PUT _snapshot/"
                f"{REPOSITORY}`: s3, or fs on a path every node shares), or start the nodes with path.repo "
                "(the local stack's node has it since it was added: restart a node started before with "
                "`devstack down` and `devstack up`)"
            )
        location = f"{roots[0].rstrip('/')}/{REPOSITORY}"
        client.snapshot.create_repository(
            repository=REPOSITORY, body={"type": "fs", "settings": {"location": location}}
        )
    except OpenSearchException as exc:
        raise SnapshotRepositoryUnavailable(
            f"OpenSearch at {index.url} refused to register the fs snapshot repository {REPOSITORY!r} under "
            f"its path.repo ({str(exc)[:300]}); on several nodes path.repo must be one shared filesystem, "
            f"or register a repository named {REPOSITORY!r} yourself"
        ) from exc


def take(index: OpenSearchIndex, snap_id: str) -> str:
    """Snapshot this generation's index (the job is stopped); returns the snapshot's name."""
    from opensearchpy.exceptions import OpenSearchException

    name = snapshot_name(index.index, snap_id)
    client = index.client()
    ensure_repository(index, client)
    body = {"indices": index.index, "include_global_state": False, "include_aliases": False}
    try:
        reply = client.snapshot.create(
            repository=REPOSITORY, snapshot=name, body=body, wait_for_completion=True, request_timeout=WAIT_S
        )
    except OpenSearchException as exc:
        raise _unavailable(index, f"snapshot index {index.index!r}", exc) from exc
    state = reply.get("snapshot", {}).get("state")
    if state != "SUCCESS":
        raise SearchBackendUnavailable(
            f"OpenSearch's snapshot {REPOSITORY}/{name} of {index.index!r} ended {state} "
            f"({reply.get('snapshot', {}).get('failures')}); check the repository's disk and take the "
            "snapshot again"
        )
    return name


def check(index: OpenSearchIndex, repository: str, name: str) -> None:
    """The snapshot is complete and holds this generation's index; raises before anything changes."""
    from opensearchpy.exceptions import NotFoundError, OpenSearchException

    try:
        reply = index.client().snapshot.get(repository=repository, snapshot=name)
    except NotFoundError:
        reply = {}
    except OpenSearchException as exc:
        raise _unavailable(index, f"read snapshot {repository}/{name}", exc) from exc
    if not holds(reply, index.index):
        raise SnapshotNotFound(
            f"OpenSearch at {index.url} has no complete snapshot {repository}/{name} of index "
            f"{index.index!r} (deleted from the repository, or another cluster); pick another snapshot "
            "or rebuild the views (`materializers rebuild`)"
        )


def restore(index: OpenSearchIndex, repository: str, name: str) -> None:
    """Steps 1-4 of the module docstring."""
    from opensearchpy.exceptions import OpenSearchException

    staging = replace(index, index=index.index + STAGING_SUFFIX)
    client = index.client()
    try:
        aliased = (
            client.indices.get_alias(name=index.alias)
            if client.indices.exists_alias(name=index.alias)
            else {}
        )
        if staging.index in aliased:  # an earlier restore stopped after its step 2: the live name is free
            _restore_as(client, repository, name, index.index, index.index)
            index.switch_alias()
        for target in (staging, index):  # steps 1-2, then 3-4
            _restore_as(client, repository, name, index.index, target.index)
            target.switch_alias()
        client.indices.delete(index=staging.index, ignore_unavailable=True)
    except OpenSearchException as exc:
        raise _unavailable(index, f"restore {index.index!r} from snapshot {repository}/{name}", exc) from exc


def _restore_as(client: OpenSearch, repository: str, name: str, index: str, target: str) -> None:
    """Restore the snapshot's `index` as `target`, replacing what has that name (the live index, or
    an earlier attempt's leftover: neither holds the alias now), once its shards are started."""
    client.indices.delete(index=target, ignore_unavailable=True)
    body: dict[str, Any] = {"indices": index, "include_global_state": False, "include_aliases": False}
    if target != index:
        body |= {"rename_pattern": "^(.*)$", "rename_replacement": target}
    client.snapshot.restore(
        repository=repository, snapshot=name, body=body, wait_for_completion=True, request_timeout=WAIT_S
    )
    # the restore's reply comes when its shards are recovered; the health makes "started" explicit
    health = client.cluster.health(index=target, wait_for_status="yellow", request_timeout=60)
    if health.get("timed_out"):
        raise SearchBackendUnavailable(
            f"index {target!r} restored from snapshot {repository}/{name} did not start (health "
            f"{health.get('status')}); check the cluster's health and run the same restore again"
        )
