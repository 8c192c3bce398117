"""The `View` protocol: what a job needs of a store it keeps up to date, whatever the store is.

A job (job.py) drives a list of views without knowing their names. Per micro-batch it:
1. decodes the batch (changes.py's row shape) and sends undecodable records to the dead letters;
2. hands every view the batch's changes, through one of two paths:
   - a *small* batch (planned size at most `small_batch_rows`, and every view's `in_driver` says yes)
     is decoded by ONE Spark job into a pyarrow Table in the driver: `apply_table`;
   - a larger batch stays a persisted DataFrame: `apply_frame`. A view whose `collects` says yes is
     handed the batch as Arrow too (`FrameBatch.collected`), collected ONCE for every such view
     when more than one asks (a Spark job less); otherwise it reads the DataFrame itself (the cache's
     `mapInArrow` on the executors, the warehouse's Spark MERGE);
   views marked `parallel` run in a thread of their own meanwhile (their work runs elsewhere: on the
   executors, in Redis, in delta-rs's threads), the others one after the other in the driver;
3. dead-letters what the views refused (`Reject`: source topic, partition, offset, error);
4. every `optimize_every` batches calls `compact`.
Spark commits the batch to its checkpoint only after every view returned. A crash anywhere re-runs
the whole batch, so `apply_*` MUST be idempotent: key each write on the change's `position` (never
let an older position overwrite a newer one, keep a deleted entity's position) and/or on
(`app_id`, `batch_id`) — the app id belongs to the checkpoint, batch ids grow within it.

`check` runs before anything is written or a Spark session exists (bad input fails in a second);
`prepare` creates the view's state before the query starts. `verify` compares the view with the
source of truth (truth.py). `DriverView` is a base for views written from the driver alone.
Views are checked against this protocol when a materializer is loaded (`check_view`).
A view of a materializer's own may come as a factory, called once per job with the job's
`ViewContext` (its materializer, generation, folder and run config) rather than the whole plan.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from materializers.errors import BadView

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from materializers.config import RunConfig
    from materializers.truth import Difference, Truth


class ViewContext(Protocol):
    """What a view factory is told about the job it serves (`JobPlan` is one)."""

    @property
    def name(self) -> str:
        """The materializer's name."""
        ...

    @property
    def data_columns(self) -> tuple[str, ...]:
        """The data columns every change carries, after the standard ones."""
        ...

    @property
    def generation(self) -> str:
        """The views' generation (\"\" before any rebuild): a view keeps each generation apart."""
        ...

    @property
    def view_dir(self) -> Path:
        """A folder of this generation's own, for a view that keeps files."""
        ...

    @property
    def redis_prefix(self) -> str:
        """The Redis key prefix of this generation's keys."""
        ...

    @property
    def config(self) -> RunConfig:
        """The run's configuration: its endpoints (Kafka, Redis, Postgres, ...) and settings."""
        ...


Reject = tuple[str, int, int, str]  # source topic, partition, offset; why the change was refused
# Columns a view may ask for besides a change's and the materializer's data columns (changes.py).
DERIVED_COLUMNS = ("event_date",)  # `event_date()`: the warehouse's partition column
MICROS_PER_DAY = 86_400_000_000


def event_date() -> Column:
    """The UTC calendar date of a change's `event_ts`, whatever the session's time zone, in integer
    arithmetic (the warehouse's partition column). Spark's `to_date` reads the date in the session's
    zone, the driver host's by default: a driver elsewhere would file the same change under another
    date, and a re-run's history lookup reads the partitions of the batch's dates. Its zone conversion
    was also a visible share of the executors' CPU in an Avro backfill's decode."""
    from pyspark.sql import functions as F

    day = MICROS_PER_DAY  # the micros less their remainder divide exactly: `div` is the floor too
    return F.expr(
        f"date_from_unix_date(CAST((unix_micros(event_ts) - pmod(unix_micros(event_ts), {day})) div {day} AS INT))"
    )


def split_refused(rows: pa.Table) -> tuple[list[Reject], pa.Table]:
    """(the rejects of `rows` whose `error` is set, the other rows), Arrow in, Arrow out (pure; a
    table without an `error` column has no refused rows). A RecordBatch works the same."""
    import pyarrow.compute as pc

    if "error" not in rows.schema.names or rows.column("error").null_count == rows.num_rows:
        return [], rows
    failed = pc.is_valid(rows.column("error"))
    refused = rows.filter(failed).select(["src_topic", "src_partition", "src_offset", "error"]).to_pylist()
    rejects: list[Reject] = [
        (r["src_topic"], r["src_partition"], r["src_offset"], r["error"]) for r in refused
    ]
    return rejects, rows.filter(pc.invert(failed))


@dataclass(frozen=True, slots=True, kw_only=True)
class TableBatch:
    """A small batch, whole in the driver. `table` holds the changes only (error rows went to the dead
    letters), the columns every view asked for (`View.columns`); a fold's patches (a sequential
    materializer) sorted by entity, then position."""

    spark: SparkSession
    app_id: str
    batch_id: int
    table: pa.Table


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameBatch:
    """A large batch as a persisted DataFrame of changes: an entity's changes in one partition, in
    offset order (as Kafka's partitions hold them; partitioned by entity and sorted by position for a
    fold's patches, and where the query splits Kafka's partitions: `job.split_reads`).
    `rows`: how many changes it holds (None: unknown, the one-pass path below).
    `collected`: the batch as Arrow in the driver, when this view `collects` and shares the job's one
    collect with another view (None: read `changes` yourself, e.g. with `table`).
    A `single_pass` view that is its job's only view gets the decoded frame as it is: rows with a
    non-null `error` column are undecodable records it must return as rejects, unapplied."""

    spark: SparkSession
    app_id: str
    batch_id: int
    changes: DataFrame
    rows: int | None
    collected: pa.Table | None = None

    def table(self, columns: Sequence[str]) -> pa.Table:
        """The batch's `columns` as Arrow in the driver: the shared collect, or one Spark job."""
        return (
            collect(self.changes, columns) if self.collected is None else self.collected.select(list(columns))
        )


@runtime_checkable
class View(Protocol):
    """A store a job keeps up to date from a change stream; see the module docstring for the order
    in which a job calls its members. A structural protocol: any object with these members is a view
    (no base class needed), so a view can wrap a client of any store; `DriverView` implements the
    Spark side for views written from the driver alone.

    Every `apply_*` must be idempotent (a crash re-runs the whole batch): key each write on the
    change's `position`, or on (`app_id`, `batch_id`).

    Raises (when a materializer is loaded, before anything starts):
        BadView: a member is missing, `name` is not a non-empty string, a flag is not a bool, or two
            views of one materializer share a name.

    Example: docs/examples/view.py (each order's status in a dict, kept from the order events):

        >>> class OrderStatus(DriverView):
        ...     name = "order_status"
        ...     def columns(self): return ("entity", "position", "event_type")
        ...     def apply_table(self, batch): ...  # apply each change above the position held
        ...     def verify(self, truth): return compare(self.name, expected, actual)
        >>> view = OrderStatus()
        >>> run(replace(ORDERS, builtin_views=(), views=(view,)), config=config, available_now=True)
        0
    """

    @property
    def name(self) -> str:
        """Unique within a job: step timings, failpoints (`after-<name>`), `--views` and `verify`'s
        differences use it."""
        ...

    @property
    def parallel(self) -> bool:
        """Applied in a thread of its own, beside the other views (its work runs outside the driver's
        Python: on Spark's executors, in its store, in native threads that release the GIL)."""
        ...

    @property
    def single_pass(self) -> bool:
        """As a job's only view, it takes the decoded frame with its error rows (see `FrameBatch`):
        decoding and applying in one Spark job, nothing persisted."""
        ...

    def columns(self) -> tuple[str, ...]:
        """The change columns it reads (changes.CHANGE_COLUMNS, data columns, DERIVED_COLUMNS)."""
        ...

    def check(self) -> None:
        """Probe the store before anything is written or a Spark session exists, so bad input fails
        in a second; write nothing.

        Raises:
            ViewUnavailable: the store cannot be reached or is misconfigured (say what to fix).
        """
        ...

    def prepare(self, spark: SparkSession) -> None:
        """Create the view's state (tables, directories) before the query starts; must be repeatable
        (it runs at every start).

        Parameters:
            spark: the driver's session, for views whose state is a Spark table.
        """
        ...

    def in_driver(self, rows: int) -> bool:
        """Whether a batch of `rows` changes may be written from the driver (the small-batch path
        needs every view's yes; say no when the driver cannot reach the store)."""
        ...

    def collects(self, rows: int) -> bool:
        """On the executors' path: whether it wants the batch of `rows` changes as Arrow in the driver."""
        ...

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        """Apply a small batch (whole in the driver as Arrow) idempotently.

        Parameters:
            batch: the changes, with the columns every view asked for, and the (`app_id`,
                `batch_id`) pair to key a batch-level marker on.

        Returns:
            The changes it refused (a fold's version gap, a value the store cannot hold): they go to
            the dead letters. Empty when it applied everything.
        """
        ...

    def apply_frame(self, batch: FrameBatch) -> Sequence[Reject]:
        """Apply a large batch (a persisted DataFrame) idempotently; returns as `apply_table`.

        Parameters:
            batch: the changes as a DataFrame (`rows` of them; None: the one-pass path, error rows
                included), `collected` as Arrow when the job shares one collect between views.
        """
        ...

    def compact(self, spark: SparkSession, rows: int | None) -> None:
        """Periodic maintenance after a batch of `rows` changes (None: unknown); may do nothing."""
        ...

    def verify(self, truth: Truth) -> list[Difference]:
        """Every entity where the view differs from the source of truth (`materializers verify`).

        Parameters:
            truth: what the view must hold per entity, as text: a CDC table's live rows, or each
                stream's fold of the events topic (`Materializer.fold`).

        Returns:
            The differences (`materializers.truth.compare` builds them from two dicts); empty when
            it agrees.
        """
        ...


PROTOCOL_METHODS = (
    "columns",
    "check",
    "prepare",
    "in_driver",
    "collects",
    "apply_table",
    "apply_frame",
    "compact",
    "verify",
)
PROTOCOL_FLAGS = ("parallel", "single_pass")


class DriverView(ABC):
    """A base for a view written from the driver alone (a table in a database, a file, a service):
    implement `name`, `columns`, `apply_table` and `verify`. A large batch reaches it as Arrow too
    (`collects`), so it needs no Spark code; `check`, `prepare` and `compact` do nothing unless
    overridden. Only for batches the driver can hold: a backfill's are capped by
    `max_offsets_per_trigger`.

    Example: docs/examples/view.py, shown under `View`. `apply_table` gets `batch.table`, a pyarrow
    Table of the columns `columns()` names (`entity`, `position`, `op`, the data columns), a fold's
    patches sorted by entity, then position:

        >>> def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        ...     for change in batch.table.to_pylist():
        ...         if change["position"] > self.held.get(change["entity"], ("", None))[0]:  # re-run: no-op
        ...             self.held[change["entity"]] = (change["position"], change["event_type"])
        ...     return ()  # nothing refused
    """

    parallel = False
    single_pass = False

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def columns(self) -> tuple[str, ...]: ...

    @abstractmethod
    def apply_table(self, batch: TableBatch) -> Sequence[Reject]: ...

    @abstractmethod
    def verify(self, truth: Truth) -> list[Difference]: ...

    def check(self) -> None:
        return None

    def prepare(self, spark: SparkSession) -> None:
        return None

    def in_driver(self, rows: int) -> bool:
        return True

    def collects(self, rows: int) -> bool:
        return True

    def apply_frame(self, batch: FrameBatch) -> Sequence[Reject]:
        table = batch.table(self.columns())
        return self.apply_table(
            TableBatch(spark=batch.spark, app_id=batch.app_id, batch_id=batch.batch_id, table=table)
        )

    def compact(self, spark: SparkSession, rows: int | None) -> None:
        return None


def collect(changes: DataFrame, columns: Sequence[str]) -> pa.Table:
    """`columns` of a frame of changes as Arrow in the driver (one Spark job); DERIVED_COLUMNS built."""
    from pyspark.sql import functions as F

    wanted = list(dict.fromkeys(columns))
    return changes.select(
        *[event_date().alias(c) if c == "event_date" else F.col(f"`{c}`") for c in wanted]
    ).toArrow()


def missing_members(candidate: object) -> list[str]:
    """What `candidate` lacks of the protocol (pure): absent or non-callable methods, a name that is
    not a non-empty string, flags that are not booleans. Empty: it implements `View`."""
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(candidate, m, None))]
    name = getattr(candidate, "name", None)
    if not isinstance(name, str) or not name.strip():
        missing.append("name (a non-empty str)")
    missing += [f"{f} (a bool)" for f in PROTOCOL_FLAGS if not isinstance(getattr(candidate, f, None), bool)]
    return missing


def is_factory(source: object) -> bool:
    """Whether a materializer's view entry is a factory (a class, or a callable that is no view),
    called with the job's `ViewContext`, rather than a view itself."""
    return isinstance(source, type) or (callable(source) and not isinstance(source, View))


def check_view(candidate: object, owner: str) -> View:
    """`candidate` as a View, or BadView naming what it lacks and how to fix it."""
    missing = missing_members(candidate)
    if isinstance(candidate, type) or missing or not isinstance(candidate, View):
        what = f"a class ({candidate.__name__})" if isinstance(candidate, type) else repr(candidate)[:120]
        lacks = (
            "pass an instance, not the class"
            if isinstance(candidate, type)
            else f"missing {', '.join(missing) or 'nothing, but isinstance(view, View) is false'}"
        )
        raise BadView(
            f"view {what} of materializer {owner!r} does not implement materializers.view.View ({lacks}); "
            "implement the protocol's members, or subclass materializers.view.DriverView and implement "
            "name, columns, apply_table and verify"
        )
    return candidate


def check_names(views: Sequence[View], owner: str) -> None:
    """Refuse two views with one name: their timings, failpoints and state would collide."""
    names = [v.name for v in views]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadView(
            f"materializer {owner!r} has more than one view named {', '.join(map(repr, twice))} "
            f"(views: {', '.join(names)}); give each view its own name, or leave the built-in one out "
            "with Materializer(builtin_views=...)"
        )
