"""PySpark Structured Streaming materializers: a Kafka topic (CDC or event store) kept as views —
a Redis cache, a search index, a Delta warehouse, a Postgres read model, or a view of your own.

Public API (each name is imported on first use: Spark's Python workers import submodules of this
package and must not pay for the rest):

    >>> from materializers import Materializer, RunConfig, run
    >>> from shop.products import PRODUCTS
    >>> run(PRODUCTS, "mypkg.views:orders_by_customer", config=RunConfig.from_env(), start="earliest")

- `Materializer`: what one job is (source topic, decoder, data columns, the views it keeps, your own
  `views` among them); `run` starts several in one Spark driver, a streaming query each, and
  returns when every query stopped (0) or one failed (1); `RunConfig` says where state lives and
  how batches run (`RunConfig.from_env()`, then `with_overrides`).
- `View`: the protocol a store implements to be kept up to date (check, prepare, apply a small batch
  as Arrow / a large one as a DataFrame, compact, verify), with `DriverView` as the base for stores
  written from the driver, `TableBatch`/`FrameBatch` what they are handed, `Reject` what they refuse;
  `read_model(table)` is the built-in Postgres read-model view.
- `JobPlan`: a materializer resolved against a config (topic, checkpoint, views);
  `materializers.ops.verify.verify(plan)` compares every view with its source of truth.
- Errors, all under `MaterializerError`: `BadMaterializer`, `BadView`, `UnknownMaterializer`,
  `UnknownView`, `ConflictingJobs`, `ViewUnavailable`, `SourceUnavailable`, `CheckpointMismatch`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkakit.exports import lazy_exports
from materializers.errors import (
    BadMaterializer,
    BadView,
    CheckpointMismatch,
    ConflictingJobs,
    MaterializerError,
    SourceUnavailable,
    UnknownMaterializer,
    UnknownView,
    ViewUnavailable,
)
from materializers.spark.memory import keep_freed_pages

__all__ = [
    "BadMaterializer",
    "BadView",
    "CheckpointMismatch",
    "ConflictingJobs",
    "DriverView",
    "FrameBatch",
    "JobPlan",
    "Materializer",
    "MaterializerError",
    "Reject",
    "RunConfig",
    "SourceUnavailable",
    "TableBatch",
    "UnknownMaterializer",
    "UnknownView",
    "View",
    "ViewUnavailable",
    "read_model",
    "run",
]

if TYPE_CHECKING:
    from materializers.config import RunConfig
    from materializers.launch import run
    from materializers.materializer import Materializer
    from materializers.plan import JobPlan
    from materializers.view import DriverView, FrameBatch, Reject, TableBatch, View
    from materializers.views.read_model import read_model

# Before anything here loads pyarrow: its jemalloc reads its settings once, then.
keep_freed_pages()

__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "materializers.config": ("RunConfig",),
        "materializers.launch": ("run",),
        "materializers.plan": ("JobPlan",),
        "materializers.materializer": ("Materializer",),
        "materializers.view": ("DriverView", "FrameBatch", "Reject", "TableBatch", "View"),
        "materializers.views.read_model": ("read_model",),
    },
)
