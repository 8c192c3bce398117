"""The current window of each group of an aggregate view, in Redis (`AggregateView.redis_current`).

Key `<prefix>:<view>:current:<group keys as a JSON array>` is a hash: `window_start`, `window_end`
(epoch ms) and the aggregations of the newest window the group has (a null value: no field). One Lua
script writes a row only if its window starts at or after the stored one: an update of an older window
(a late record within the lateness) leaves a newer current window alone, and a batch written twice (a
re-run after a crash: the rows are absolute values, not increments) changes nothing. Written after the
batch's MERGE, from the executors, `PIPELINE` rows per round trip; the Delta table stays the record of
every window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from materializers.views.redis_cache import PIPELINE, RedisCache

CURRENT_LUA = """
local stored = redis.call('HGET', KEYS[1], 'window_start')
if stored and tonumber(ARGV[1]) < tonumber(stored) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'window_start', ARGV[1], 'window_end', ARGV[2], unpack(ARGV, 3))
return 1
"""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True, slots=True)
class CurrentWindows:
    cache: RedisCache  # the view's Redis (URL, auth, the materializer's key prefix)
    group_by: tuple[str, ...]
    values: tuple[str, ...]  # the aggregations' output columns

    def key(self, groups: Sequence[Any]) -> str:
        """One key per group: its values as a JSON array, so no value can run into another (pure)."""
        return self.cache.key("current:" + json.dumps(list(groups), separators=(",", ":"), default=str))

    def write_partition(self, rows: Iterable[Any]) -> None:
        """Executor side: rows of (window_start ms, window_end ms, *group_by, *values)."""
        client = self.cache.client()
        script = client.register_script(CURRENT_LUA)
        pipe = client.pipeline(transaction=False)
        pending = 0
        for row in rows:
            found = row.asDict()
            pairs = [x for v in self.values if found[v] is not None for x in (v, _text(found[v]))]
            args = [found["window_start"], found["window_end"], *pairs]
            script(keys=[self.key([found[g] for g in self.group_by])], args=args, client=pipe)
            pending += 1
            if pending == PIPELINE:
                pipe.execute()
                pending = 0
        if pending:
            pipe.execute()

    def read(self, groups: Sequence[Any]) -> dict[str, str] | None:
        """The group's current window as stored (None: no window yet)."""
        found: dict[bytes, bytes] = self.cache.client().hgetall(self.key(groups))  # type: ignore[assignment]
        return {k.decode(): v.decode() for k, v in found.items()} or None
