"""Dead letters of an aggregate view: the records its batches refused, sent to the dead-letter topic
after the batch, by the driver's status poll, with their topic/partition/offset and the reason.

Why after, not inside foreachBatch: a refused record never reaches the sink (the aggregation's output
is windows), and reading every batch twice to find the rare refusal would double the decoding. The
batch's progress says how many records it refused (`observe`, exact per record); only a batch that
refused some is read again (aggregate_replay.refused_records: the batch's own offsets, watermark and
clock from the batch log, so the replay refuses exactly the records the batch refused).

Bookkeeping, so a crash loses none: `dead_letters.json` in the checkpoint holds the last batch id up
to which every refused record was sent. A driver starting from a checkpoint re-reads the batches
after it up to the last committed one (their counts died with the old driver), and a batch whose
progress the poll missed is re-read too. Delivery is at-least-once, as the other jobs' dead letters:
a crash between the send and the marker sends those records again (their coordinates identify them).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from materializers.aggregates import batches as aggregate_batches
from materializers.aggregates.declaration import AggregateView
from materializers.aggregates.replay import refused_records
from materializers.errors import CheckpointMismatch
from materializers.plan import JobPlan
from materializers.runtime import dead_letters

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
MARKER_FILE = "dead_letters.json"


class RefusedRecords:
    """Which batches still owe dead letters, and the sending (`send`)."""

    def __init__(self, spark: SparkSession, plan: JobPlan, view: AggregateView) -> None:
        self.spark, self.plan, self.view = spark, plan, view
        self.through = self._marker()  # every refused record of batches <= this was sent
        self.pending: set[int] = set()
        self.seen = self.through  # the last batch id `saw` was told about

    def _marker(self) -> int:
        path = self.plan.checkpoint / MARKER_FILE
        return int(json.loads(path.read_text())["through"]) if path.is_file() else -1

    def resume(self, last_committed: int) -> None:
        """The batches after the marker up to `last_committed`: refused counts unknown, all re-read."""
        self.pending.update(range(self.through + 1, last_committed + 1))
        self.seen = max(self.seen, last_committed)

    def saw(self, batch: int, refused: int) -> None:
        """Batch `batch` finished having refused `refused` records; batches skipped since the last
        call (a progress the poll missed) are re-read."""
        self.pending.update(range(self.seen + 1, batch))
        if refused:
            self.pending.add(batch)
        self.seen = max(self.seen, batch)

    def send(self) -> int:
        """Send the pending batches' refused records; how many were sent. Moves the marker to the last
        batch seen."""
        sent = 0
        if self.pending:
            sent = self._send(sorted(self.pending))
            self.pending.clear()
        if self.seen > self.through:
            self.through = self.seen
            (self.plan.checkpoint / MARKER_FILE).write_text(json.dumps({"through": self.through}))
        return sent

    def _send(self, batches: list[int]) -> int:
        wanted = set(batches)
        try:
            every = aggregate_batches.ranges(
                self.plan.topic,
                aggregate_batches.initial_offsets(self.plan.checkpoint),
                aggregate_batches.read(self.plan.checkpoint),
            )
        except CheckpointMismatch as exc:  # a checkpoint begun before batches were logged
            log.error("refused records of batches %s not dead-lettered: %s", batches, exc)
            return 0
        ranges = [r for r in every if r.batch in wanted]
        if not ranges:
            return 0
        found = refused_records(self.spark, self.plan, self.view, ranges).persist()
        try:
            count = found.count()
            if count:
                endpoints = self.plan.config.endpoints
                dead_letters.write(
                    found,
                    bootstrap=endpoints.kafka_bootstrap_servers,
                    client_config=endpoints.kafka_client,
                    topic=self.plan.dlq_topic,
                    materializer=self.plan.spec.name,
                )
                log.warning(
                    "%d refused record(s) of %s sent to dead-letter topic %s",
                    count,
                    self.plan.topic,
                    self.plan.dlq_topic,
                )
            return count
        finally:
            found.unpersist()
