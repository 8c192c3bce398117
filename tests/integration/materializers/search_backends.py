"""The two search backends behind one test interface: both answer `live` (each live entity's search
fields), `read` and `search` from what they hold, after making every acknowledged write visible.
Every view's contract is `materializers.testing.ViewContract` (test_view_contract.py).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from devstack import opensearch as opensearch_service
from devstack import stack
from devstack.config import StackConfig
from materializers.plan import JobPlan

BACKENDS = ("tantivy", "opensearch")
START_IT = "start it with `STACK_OPENSEARCH=1 .venv/bin/devstack up` (or set OPENSEARCH_URL)"


def opensearch_url() -> str | None:
    """OPENSEARCH_URL from the environment, else from the running local stack's env file."""
    if os.environ.get("OPENSEARCH_URL"):
        return os.environ["OPENSEARCH_URL"]
    env_file = StackConfig.from_env().env_file
    return stack.read_env(env_file).get("OPENSEARCH_URL") if env_file.exists() else None


def require_opensearch() -> str:
    url = opensearch_url()
    if url is None or not opensearch_service.healthy(url):
        # fail, not skip: `make test` starts it (STACK_OPENSEARCH=1), so a silent node is a broken stack
        pytest.fail(f"OpenSearch does not answer ({url or 'no OPENSEARCH_URL'}): {START_IT}", pytrace=False)
    return url


class SearchBackend:
    """A backend's run settings and reads over a plan's search view."""

    def __init__(self, name: str, url: str | None) -> None:
        self.name, self.url = name, url

    def overrides(self) -> dict[str, str]:
        return {"search_backend": self.name, **({"opensearch_url": self.url} if self.url else {})}

    def cli_flags(self) -> list[str]:
        return ["--search-backend", self.name, *(["--opensearch-url", self.url] if self.url else [])]

    def store(self, plan: JobPlan) -> Any:
        found = plan.opensearch() if self.name == "opensearch" else plan.search()
        assert found is not None, f"plan of {plan.spec.name} has no {self.name} search view"
        if self.name == "opensearch":
            found.refresh()
        return found

    def live(self, plan: JobPlan) -> dict[str, dict[str, str]]:
        fields = plan.spec.search_fields
        held = self.store(plan).live_documents()
        return {e: {k: v for k, v in doc.items() if k in fields} for e, doc in held.items()}

    def search(self, plan: JobPlan, text: str) -> list[str]:
        return sorted(self.store(plan).search(text, 10))

    def drop(self, plan: JobPlan) -> None:
        """Delete every OpenSearch index behind the plan's alias (Tantivy's lives in tmp_path)."""
        remote = plan.opensearch()
        if remote is not None:
            remote.client().indices.delete(index=f"{remote.alias}-*", ignore_unavailable=True)
