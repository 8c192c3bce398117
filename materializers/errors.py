"""Errors raised by the materializers package; all derive from `kafkakit.errors.ToolkitError`.

Every message names what is wrong and what to do next.
"""

from __future__ import annotations

from kafkakit.errors import ToolkitError


class MaterializerError(ToolkitError):
    """Root of the materializers package's errors."""


class UnknownMaterializer(MaterializerError):
    """The name given is not in the catalog."""


class CheckpointMismatch(MaterializerError):
    """A checkpoint directory belongs to a different materializer or query."""


class ViewUnavailable(MaterializerError):
    """A view's backing store (Redis, the index directory, the Delta path) cannot be reached."""


class SearchBackendUnavailable(ViewUnavailable):
    """OpenSearch does not answer at the configured address, or answered with an error."""


class MappingConflict(ViewUnavailable):
    """The index exists with a mapping that cannot hold the materializer's columns."""


class SourceUnavailable(MaterializerError):
    """Kafka, the schema registry or Postgres cannot be reached or lacks a topic/table."""


class JobNotRunning(MaterializerError):
    """`stop`/`status` asked about a job that has no live driver."""


class JobRunning(MaterializerError):
    """A command that rewrites a view (restore) was asked for while the job's driver writes it."""


class SnapshotNotFound(MaterializerError):
    """No snapshot with that id under the home directory."""


class SnapshotMismatch(MaterializerError):
    """The snapshot belongs to another materializer, topic or generation of the views."""


class NothingCommitted(MaterializerError):
    """The job's checkpoint has no committed batch, so no offsets can be paired with the views."""


class NotCaughtUp(MaterializerError):
    """A rebuild did not reach lag 0 within its time limit; the live view was left untouched."""


class BadRebuild(MaterializerError):
    """A rebuild was asked for with options that cannot produce a complete view."""


class ConflictingJobs(MaterializerError):
    """Materializers asked to run together would share a name, a checkpoint or a Redis prefix."""


class BadMaterializer(MaterializerError):
    """A `module:attr` or entry point that does not import or does not name a Materializer."""


class BadView(MaterializerError):
    """A materializer's view does not implement the View protocol, or two views share a name."""


class UnknownView(MaterializerError):
    """`--views` names a view the materializer does not have."""


class BadAggregate(MaterializerError):
    """An aggregate view's definition cannot run; the subclasses name the field at fault."""


class UnknownColumn(BadAggregate):
    """An aggregate names a column (group key, aggregated field, event time) its source does not have."""


class BadWindow(BadAggregate):
    """A window, slide or allowed lateness that is not a positive duration, or a slide larger than the size."""


class BadAggregation(BadAggregate):
    """No group keys or aggregations, sum/min/max over a non-numeric field, or two outputs sharing a name."""


class LatePolicyNotSupported(BadAggregate):
    """A late-data policy that is unknown or misconfigured (`correct` without a horizon longer than the
    lateness, a horizon with `drop`)."""


class StateIncompatible(MaterializerError):
    """A checkpoint's (or aggregate table's) state was built by another definition of the aggregate."""


class IncompleteHistory(MaterializerError):
    """An aggregate over CDC would take back rows it never added: the source's history it read is
    incomplete (compacted, deleted, or begun after the rows), so its sums cannot be exact."""
