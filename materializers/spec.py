"""What a materializer is: input topic + a transform to changes + which views it keeps (frozen)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from materializers.avro_events import WriterSchemas

# raw Kafka rows (+ the registry for event decoding) -> the decoded frame (changes + errors); see changes.py
Transform = Callable[["DataFrame", "WriterSchemas"], "DataFrame"]
# Called once per job: a decoder may build its Spark expressions on its first batch and reuse them
# (building Debezium's took ~1,500 py4j calls, 0.4-0.7 s of every micro-batch).
Decoder = Callable[[], Transform]


@dataclass(frozen=True, slots=True, kw_only=True)
class Materializer:
    """One job. `data_ddl` types the data columns every change carries after the standard ones.

    `sequential` marks event folds: the cache applies version n+1 only (patches), CDC upserts apply
    whenever newer. `search_fields` empty = no search view; `current_table` False = history/facts only.
    """

    name: str
    kind: Literal["cdc", "events"]
    default_topic: str
    default_table: str
    data_ddl: str
    decoder: Decoder
    sequential: bool
    search_fields: tuple[str, ...] = ()
    current_table: bool = True

    @property
    def data_columns(self) -> tuple[str, ...]:
        return tuple(part.strip().split()[0].strip("`") for part in self.data_ddl.split(","))
