"""Every built-in view through `materializers.testing.ViewContract`, the suite a user's own view
subclasses: the Redis cache, both search backends, the Delta warehouse and the Postgres read model.

The materializers are module-level names: each test's driver process imports them from here (the
plugin's `materializer_factory` puts this directory on the driver's path).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
import redis
from search_backends import require_opensearch

from materializers import (
    Difference,
    DriverView,
    JobPlan,
    Reject,
    TableBatch,
    Truth,
    ViewContext,
    compare,
    read_model,
)
from materializers.testing import ViewContract, contract_materializer

pytestmark = pytest.mark.integration

CACHE = contract_materializer("cache_contract", builtin_views=("cache",))
SEARCH = contract_materializer(
    "search_contract", builtin_views=("search",), search_fields=("name", "description")
)
WAREHOUSE = contract_materializer("warehouse_contract", builtin_views=("warehouse",))
READ_MODEL = contract_materializer("read_model_contract", views=(read_model(),))


class TestCache(ViewContract):
    materializer = CACHE
    view = "cache"


class TestTantivy(ViewContract):
    materializer = SEARCH
    view = "search"


class TestOpenSearch(ViewContract):
    materializer = SEARCH
    view = "search"

    def driver_env(self) -> dict[str, str]:
        return {"MATERIALIZERS_SEARCH_BACKEND": "opensearch", "OPENSEARCH_URL": require_opensearch()}

    def forget(self, plan: JobPlan) -> None:
        remote = plan.opensearch()
        assert remote is not None
        remote.client().indices.delete(index=f"{remote.alias}-*", ignore_unavailable=True)


class TestWarehouse(ViewContract):
    materializer = WAREHOUSE
    view = "warehouse"


class TestReadModel(ViewContract):
    materializer = READ_MODEL
    view = "postgres"

    def forget(self, plan: JobPlan) -> None:
        with psycopg.connect(plan.config.endpoints.pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "mv_{plan.spec.name}"')


class Unguarded(DriverView):
    """A view that writes every change it is handed, ignoring positions: it must fail the contract."""

    name = "unguarded"

    def __init__(self, redis_url: str, prefix: str) -> None:
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.key = f"{prefix}#unguarded"

    @classmethod
    def for_job(cls, job: ViewContext) -> Unguarded:
        return cls(job.config.endpoints.redis_url, job.redis_prefix)

    def columns(self) -> tuple[str, ...]:
        return ("entity", "op", "name")

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        for change in batch.table.to_pylist():
            if change["op"] == "delete":
                self.client.hdel(self.key, change["entity"])
            else:
                self.client.hset(self.key, change["entity"], change["name"])
        return ()

    def verify(self, truth: Truth) -> list[Difference]:
        expected = {e: {"name": row["name"]} for e, row in truth.rows.items()}
        return compare(
            self.name, expected, {e: {"name": n} for e, n in self.client.hgetall(self.key).items()}
        )


UNGUARDED = contract_materializer("unguarded_contract", views=(Unguarded.for_job,))


class UnguardedContract(ViewContract):  # not collected (no Test prefix): run by the test below
    materializer = UNGUARDED
    view = "unguarded"


def test_a_view_that_ignores_positions_fails_the_contract(
    toolkit_stack: Any, topic_factory: Any, materializer_factory: Any
) -> None:
    with pytest.raises(AssertionError, match="unguarded"):
        UnguardedContract().test_changes_apply_once_in_position_order_and_a_replay_changes_nothing(
            toolkit_stack, topic_factory, materializer_factory
        )
