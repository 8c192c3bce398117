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
  how batches run (`RunConfig.from_env()`, then `with_overrides`); `lookup("name")` finds an
  installed materializer (or `module:attr`).
- Decoders for `Materializer.decoder`: `DebeziumDecoder` (Debezium's JSON or Avro change records of
  a table), `EventDecoder` (the event store's Avro records, fields by name, `WriterSchemas` the
  registry's writer schemas); `CHANGE_COLUMNS` is the change shape every decoder produces.
- `View`: the protocol a store implements to be kept up to date (check, prepare, apply a small batch
  as Arrow / a large one as a DataFrame, compact, verify), with `DriverView` as the base for stores
  written from the driver, `TableBatch`/`FrameBatch` what they are handed, `Reject` what they refuse,
  `ViewContext` what a view factory is told of its job; `read_model(table)` is the built-in Postgres
  read-model view.
- `JobPlan`: a materializer resolved against a config (topic, checkpoint, views); `verify(plan)`
  compares every view with its source of truth (`Truth`), each view by `compare`, naming every
  `Difference`. `SEARCH_BACKENDS` / `parse_search_backend`: the search view's backends.
- Errors, all under `MaterializerError`: `BadMaterializer`, `BadView`, `UnknownMaterializer`,
  `UnknownView`, `ConflictingJobs`, `ViewUnavailable` (`SearchBackendUnavailable`),
  `SourceUnavailable`, `CheckpointMismatch`.

Also public: `materializers.aggregates` (aggregate views), `materializers.testing` (the view
contract suite, and what a test reads of a running job), `materializers.config` (the run's
configuration and its environment variables) and `materializers.environment` (the table of those
variables). Every other module is internal and may move without notice: the sub-packages (`decode`,
`spark`, `runtime`, `ops`, `views`) and the top-level modules behind the names above (`view`, `plan`,
`materializer`, `launch`, `catalog`, `truth`, `errors`, `cli`); import from the public ones.
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
    SearchBackendUnavailable,
    SourceUnavailable,
    UnknownMaterializer,
    UnknownView,
    ViewUnavailable,
)
from materializers.spark.memory import keep_freed_pages

__all__ = [
    "CHANGE_COLUMNS",
    "SEARCH_BACKENDS",
    "BadMaterializer",
    "BadView",
    "CheckpointMismatch",
    "ConflictingJobs",
    "DebeziumDecoder",
    "Difference",
    "DriverView",
    "EventDecoder",
    "FrameBatch",
    "JobPlan",
    "Materializer",
    "MaterializerError",
    "Reject",
    "RunConfig",
    "SearchBackendUnavailable",
    "SourceUnavailable",
    "TableBatch",
    "Truth",
    "UnknownMaterializer",
    "UnknownView",
    "View",
    "ViewContext",
    "ViewUnavailable",
    "WriterSchemas",
    "compare",
    "lookup",
    "parse_search_backend",
    "read_model",
    "run",
    "verify",
]

if TYPE_CHECKING:
    from materializers.catalog import lookup
    from materializers.config import SEARCH_BACKENDS, RunConfig, parse_search_backend
    from materializers.decode.avro_events import EventDecoder, WriterSchemas
    from materializers.decode.changes import CHANGE_COLUMNS
    from materializers.decode.debezium import DebeziumDecoder
    from materializers.launch import run
    from materializers.materializer import Materializer
    from materializers.ops.verify import verify
    from materializers.plan import JobPlan
    from materializers.truth import Difference, Truth, compare
    from materializers.view import DriverView, FrameBatch, Reject, TableBatch, View, ViewContext
    from materializers.views.read_model import read_model

# Before anything here loads pyarrow: its jemalloc reads its settings once, then.
keep_freed_pages()

__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "materializers.catalog": ("lookup",),
        "materializers.config": ("SEARCH_BACKENDS", "RunConfig", "parse_search_backend"),
        "materializers.decode.avro_events": ("EventDecoder", "WriterSchemas"),
        "materializers.decode.changes": ("CHANGE_COLUMNS",),
        "materializers.decode.debezium": ("DebeziumDecoder",),
        "materializers.launch": ("run",),
        "materializers.materializer": ("Materializer",),
        "materializers.ops.verify": ("verify",),
        "materializers.plan": ("JobPlan",),
        "materializers.truth": ("Difference", "Truth", "compare"),
        "materializers.view": ("DriverView", "FrameBatch", "Reject", "TableBatch", "View", "ViewContext"),
        "materializers.views.read_model": ("read_model",),
    },
)
