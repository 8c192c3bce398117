"""Every built-in view through `materializers.testing.ViewContract`, the suite a user's own view
subclasses: the Redis cache, both search backends, the Delta warehouse and the Postgres read model.

The materializers are module-level names: each test's driver process imports them from here (the
plugin's `materializer_factory` puts this directory on the driver's path).
"""

from __future__ import annotations

import psycopg
import pytest
from search_backends import require_opensearch

from materializers import JobPlan, read_model
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
