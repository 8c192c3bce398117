"""The demo's search view on either backend: a Tantivy index on the driver (the default) or an
OpenSearch index written from the executors (`DEMO_SEARCH=opensearch`, or `--search opensearch`).

The choice reaches the materializers' driver as `--search-backend` and `--opensearch-url`; the URL is
the stack's (`OPENSEARCH_URL` in the environment, else the running local stack's env file). With
OpenSearch the node must answer before anything is created: the demo fails fast, naming how to start
it. Every search answer the demo shows names the backend that gave it.

Latency probes read the view as a searching user would: Tantivy through its searcher after the last
commit, OpenSearch through the readers' alias with a search, so a change counts once it is
searchable (after the index's refresh, 1 s by default), not merely stored (a real-time `GET` would
show it before any search can find it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from devstack import opensearch as opensearch_service
from devstack import stack
from devstack.config import StackConfig
from materializers import SEARCH_BACKENDS, JobPlan, SearchBackendUnavailable, parse_search_backend
from materializers.config import ENV_OPENSEARCH_URL

log = logging.getLogger(__name__)
ENV_DEMO_SEARCH = "DEMO_SEARCH"
LABELS = {"tantivy": "Tantivy", "opensearch": "OpenSearch"}


def backend_from_env(environ: Mapping[str, str] | None = None) -> str:
    """DEMO_SEARCH (unset: tantivy, the embedded default); ConfigError naming the choices."""
    env = os.environ if environ is None else environ
    return parse_search_backend(env.get(ENV_DEMO_SEARCH) or SEARCH_BACKENDS[0])


def stack_opensearch_url(environ: Mapping[str, str] | None = None) -> str:
    """OPENSEARCH_URL from the environment, else from the local stack's env file ("" if neither):
    the stack handle carries the five core endpoints only, OpenSearch being optional."""
    env = os.environ if environ is None else environ
    if env.get(ENV_OPENSEARCH_URL):
        return env[ENV_OPENSEARCH_URL]
    env_file = StackConfig.from_env(env).env_file
    return stack.read_env(env_file).get(ENV_OPENSEARCH_URL, "") if env_file.exists() else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchChoice:
    """The backend the products' search view lives in, and OpenSearch's address when it is that."""

    backend: str = "tantivy"
    opensearch_url: str = ""

    @property
    def label(self) -> str:
        return LABELS[self.backend]

    def run_overrides(self) -> dict[str, str]:
        """RunConfig overrides for the demo's plans (pure)."""
        url = {"opensearch_url": self.opensearch_url} if self.backend == "opensearch" else {}
        return {"search_backend": self.backend, **url}

    def driver_flags(self) -> list[str]:
        """The `materializers` CLI's global flags that put the driver's search view there (pure)."""
        url = ["--opensearch-url", self.opensearch_url] if self.backend == "opensearch" else []
        return ["--search-backend", self.backend, *url]

    def require(self) -> None:
        """OpenSearch answers (green or yellow); nothing to check for the embedded Tantivy."""
        if self.backend != "opensearch":
            return
        if not self.opensearch_url or not opensearch_service.healthy(self.opensearch_url):
            raise SearchBackendUnavailable(
                f"{ENV_DEMO_SEARCH}=opensearch, but no OpenSearch answers at "
                f"{self.opensearch_url or '(no OPENSEARCH_URL)'}: start the stack with it "
                "(`STACK_OPENSEARCH=1 make up`; `make demo` asks for it by default), or point OPENSEARCH_URL "
                f"at a node, or unset {ENV_DEMO_SEARCH} for the embedded Tantivy index"
            )


class SearchReader:
    """Reads a plan's search view on whichever backend it lives: the answers to a query, and which
    of some products a search finds now, with their stored name."""

    def __init__(self, plan: JobPlan) -> None:
        self.tantivy, self.opensearch = plan.search(), plan.opensearch()
        if self.tantivy is None and self.opensearch is None:
            raise ValueError(f"materializer {plan.spec.name!r} keeps no search view")
        self.label = LABELS["opensearch" if self.opensearch is not None else "tantivy"]

    def search(self, text: str, limit: int) -> list[str]:
        if self.opensearch is not None:
            return self.opensearch.search(text, limit)
        assert self.tantivy is not None
        return self.tantivy.search(text, limit)

    def names(self, ids: Sequence[int]) -> dict[int, str]:
        if self.opensearch is not None:
            found = self.opensearch.searchable([str(i) for i in ids])
            return {int(key): doc["name"] for key, doc in found.items() if "name" in doc}
        assert self.tantivy is not None
        index = self.tantivy
        return {i: doc["name"] for i in ids if (doc := index.read(str(i))) and "name" in doc}

    def live_count(self) -> int:
        store = self.opensearch if self.opensearch is not None else self.tantivy
        assert store is not None
        return len(store.live_documents())


def drop_indices(plan: JobPlan) -> None:
    """Delete every OpenSearch index behind the demo's alias (each generation's): the run's state,
    released like its connector and slot unless `--keep`."""
    from opensearchpy.exceptions import OpenSearchException

    remote = plan.opensearch()
    if remote is None:
        return
    try:
        remote.client().indices.delete(index=f"{remote.alias}-*", ignore_unavailable=True)
    except OpenSearchException as exc:  # the demo's outcome stands; the indices are left behind
        log.warning("could not delete the demo's OpenSearch indices %s-*: %s", remote.alias, exc)
