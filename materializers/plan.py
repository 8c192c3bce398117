"""A job's plan: everything a run needs, resolved from the materializer and the run config (pure but
for the views' factories, which a materializer may bring).

`views()` builds the list of views a `Job` drives: the built-in ones the materializer keeps
(`Materializer.builtin_views`; search only with `search_fields`), then its own (`Materializer.views`:
instances, or factories called with the plan as their `ViewContext`), restricted to `RunConfig.views`
when that names any.
Every view is checked against the protocol and names are checked unique here, before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from materializers.config import DRIVER_ROWS, VIEWS, RunConfig
from materializers.errors import BadView, UnknownView
from materializers.materializer import Materializer
from materializers.view import View, check_names, check_view, is_factory
from materializers.views.builtin import CacheView, SearchView, WarehouseView
from materializers.views.redis_cache import RedisCache
from materializers.views.search.opensearch import OpenSearchIndex, OpenSearchView, alias_name
from materializers.views.search.tantivy import SearchIndex
from materializers.views.warehouse.delta import DeltaWarehouse

GENERATIONS_DIR = "generations"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlan:
    """Everything a run needs, resolved from the spec and the run config (pure)."""

    spec: Materializer
    config: RunConfig
    topic: str
    dlq_topic: str
    job_dir: Path
    checkpoint: Path
    generation: str = ""  # "" = the layout before any rebuild; see generations.py
    view_dir: Path = Path()

    @classmethod
    def of(cls, spec: Materializer, config: RunConfig, generation: str = "") -> JobPlan:
        """The plan of one generation of the views ("" = the original layout, directly in the job dir)."""
        topic = config.topic or spec.default_topic
        job_dir = config.job_dir(spec.name)
        view_dir = job_dir / GENERATIONS_DIR / generation if generation else job_dir
        return cls(
            spec=spec,
            config=config,
            topic=topic,
            dlq_topic=config.dlq_topic or f"{topic}.dlq",
            job_dir=job_dir,
            checkpoint=Path(config.checkpoint) if config.checkpoint else view_dir / "checkpoint",
            generation=generation,
            view_dir=view_dir,
        )

    @property
    def name(self) -> str:
        """The materializer's name (`ViewContext`)."""
        return self.spec.name

    @property
    def data_columns(self) -> tuple[str, ...]:
        return self.spec.data_columns

    @property
    def base_prefix(self) -> str:
        """The Redis prefix readers start from; its `@live` key names the live generation's prefix."""
        return f"{self.config.redis_prefix}:{self.spec.name}"

    @property
    def redis_prefix(self) -> str:
        # `@` keeps a generation's keys outside the SCAN pattern `<base>:*` of the original layout.
        return f"{self.base_prefix}@{self.generation}" if self.generation else self.base_prefix

    def cache(self) -> RedisCache:
        return RedisCache(
            self.config.endpoints.redis_url, self.redis_prefix, self.config.endpoints.redis_auth
        )

    def search(self) -> SearchIndex | None:
        """The Tantivy index (None: no search view, or it lives in OpenSearch: `opensearch()`)."""
        return (
            SearchIndex(self.view_dir / "search", self.spec.search_fields)
            if self.spec.search_fields and self.keeps("search") and self.config.search_backend == "tantivy"
            else None
        )

    def opensearch(self) -> OpenSearchIndex | None:
        """The search view's OpenSearch index (None: no search view, or it is Tantivy's). Readers use
        the alias `<redis prefix>-<name>`; each generation writes an index of its own behind it."""
        if not (
            self.spec.search_fields and self.keeps("search") and self.config.search_backend == "opensearch"
        ):
            return None
        alias = alias_name(self.config.redis_prefix, self.spec.name)
        return OpenSearchIndex(
            url=self.config.opensearch_url,
            alias=alias,
            index=f"{alias}-{self.generation or 'g0'}",
            search_fields=self.spec.search_fields,
            data_columns=self.spec.data_columns,
            replicas=self.config.opensearch_replicas,
            failpoint=self.config.failpoint,
        )

    def keeps(self, view: str) -> bool:
        """Whether this run keeps the view named `view` (a built-in one only if the spec has it)."""
        if view in ("cache", "search", "warehouse") and view not in self.spec.builtin_views:
            return False
        return not self.config.views or view in self.config.views

    def warehouse_only(self) -> bool:
        """Whether the warehouse is the only view this run keeps: it writes a driver batch column-wise
        from Arrow (delta-rs), where the others turn it into Python values (the cache change by change,
        its field maps repeating every value, so a batch sized for the warehouse does not fit its heap;
        OpenSearch's documents from the batch's columns as lists; the Tantivy index a dict per change)
        and a view of the spec's own may. The condition of runtime/batch_size's byte-sized bound."""
        own = bool(self.spec.views) and (
            not self.config.views or any(v not in VIEWS for v in self.config.views)
        )
        others = self.keeps("cache") or self.search() is not None or self.opensearch() is not None
        return self.keeps("warehouse") and not others and not own

    def warehouse(self) -> DeltaWarehouse:
        return DeltaWarehouse(
            self.view_dir / "delta",
            self.spec.data_ddl,
            self.spec.current_table,
            driver_rows=self.driver_rows(),
        )

    def driver_rows(self) -> int:
        """The largest Delta batch written from the driver with delta-rs: the configured bound, or
        where no job sized it (`auto`: verify, snapshots, an aggregate view) a live stream's."""
        rows = self.config.warehouse_driver_rows
        return DRIVER_ROWS if rows is None else rows

    def views(self) -> list[View]:
        """The views a job of this plan drives, in the order it applies them; BadView / UnknownView
        (naming the fix) before anything is written."""
        built: list[View] = []
        index = self.search()
        if self.keeps("cache"):
            built.append(CacheView(self.cache()))
        if index is not None:
            built.append(SearchView(index))
        if (remote := self.opensearch()) is not None:
            built.append(OpenSearchView(remote))
        if self.keeps("warehouse"):
            built.append(WarehouseView(self.warehouse(), self.spec.data_columns))
        own = [self._own_view(source) for source in self.spec.views]
        check_names([*built, *own], self.spec.name)
        available = self.available_views(own)
        unknown = [v for v in self.config.views if v not in available]
        if unknown:
            raise UnknownView(
                f"materializer {self.spec.name!r} has no view {', '.join(map(repr, unknown))}; its views: "
                f"{', '.join(available)} (pass some of them to --views, or leave --views out for all)"
            )
        return [*built, *[v for v in own if self.keeps(v.name)]]

    def available_views(self, own: list[View]) -> list[str]:
        builtin = [v for v in self.spec.builtin_views if v != "search" or self.spec.search_fields]
        return [*builtin, *[v.name for v in own]]

    def _own_view(self, source: object) -> View:
        """A view of the spec's own: an instance as it is, a factory (a class too) called with the plan."""
        if not is_factory(source) or not callable(source):
            return check_view(source, self.spec.name)
        try:
            made = source(self)
        except BadView:
            raise
        except Exception as exc:
            raise BadView(
                f"the view factory {getattr(source, '__qualname__', source)!r} of materializer "
                f"{self.spec.name!r} failed ({type(exc).__name__}: {exc}); a factory is called with the "
                "job's context (materializers.ViewContext) and must return a View"
            ) from exc
        return check_view(made, self.spec.name)
