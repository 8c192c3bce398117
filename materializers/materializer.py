"""What a materializer is: input topic + a transform to changes + which views it keeps (frozen).

A materializer keeps the built-in views it names (`builtin_views`: the Redis cache, the search index
when it has `search_fields`, the Delta warehouse) and any `views` of its own: objects implementing
`materializers.View`, or factories called with the job's `ViewContext` (its name, generation, folder,
Redis prefix and run config) that return one: a factory lets a view take its connection settings
from the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from materializers.aggregates.declaration import AggregateView
    from materializers.decode.avro_events import WriterSchemas
    from materializers.view import View, ViewContext

# raw Kafka rows (+ the registry for event decoding) -> the decoded frame (changes + errors); see changes.py
Transform = Callable[["DataFrame", "WriterSchemas"], "DataFrame"]
# Called once per job: a decoder may build its Spark expressions on its first batch and reuse them
# (rebuilding Debezium's every batch cost a py4j call per expression node, a large share of a
# small micro-batch).
Decoder = Callable[[], Transform]
# A view of the materializer's own: an instance, or a factory taking the job's context.
ViewSource = Union["View", Callable[["ViewContext"], "View"]]
# An event materializer's fold: the cache fields an ordered run of (event_type, data) must leave.
# `verify` folds the whole topic with it, so a drift between it and the decoder shows as differences.
EventFold = Callable[[Iterable[tuple[str, Mapping[str, Any]]]], dict[str, str]]
BUILTIN_VIEWS = ("cache", "search", "warehouse")


@dataclass(frozen=True, slots=True, kw_only=True)
class Materializer:
    """One job. `data_ddl` types the data columns every change carries after the standard ones.

    `sequential` marks event folds: the cache applies version n+1 only (patches), CDC upserts apply
    whenever newer. `search_fields` empty = no search view; `current_table` False = history/facts only.
    `builtin_views`: which of cache, search, warehouse it keeps; `views`: its own (see the module doc).
    `key_column`: the CDC table's primary key column (what `verify` reads the truth by).
    `event_types` / `fold` (events): the types the decoder takes (others are dead letters) and the
    fold `verify` checks the views against.
    """

    name: str
    kind: Literal["cdc", "events", "aggregate"]
    default_topic: str
    default_table: str
    data_ddl: str
    decoder: Decoder
    sequential: bool
    search_fields: tuple[str, ...] = ()
    current_table: bool = True
    builtin_views: tuple[str, ...] = BUILTIN_VIEWS
    views: tuple[ViewSource, ...] = ()
    key_column: str = "id"
    event_types: tuple[str, ...] = ()
    fold: EventFold | None = None
    aggregate: AggregateView | None = None  # kind "aggregate": run by aggregate_job (aggregate.materializer)

    @property
    def data_columns(self) -> tuple[str, ...]:
        return tuple(part.strip().split()[0].strip("`") for part in self.data_ddl.split(","))
