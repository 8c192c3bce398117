"""Redis cache view: one hash per entity, written only forward in source position.

Key `<prefix>:<entity>` is a hash of the entity's fields plus `_pos` (the position last applied,
fixed-width string) and `_deleted` ("1" after a delete). One Lua script applies a change atomically:
1. read `_pos`; if the incoming position is not newer, do nothing (replay, duplicate, late record);
2. for a patch (event fold) require exactly version `_pos` + 1, else report a gap and do nothing;
3. upsert: replace all fields, except the change's `keep_fields` (unchanged values the source did not
   send): their stored values are read before the hash is dropped and written back (a field the hash
   does not hold stays absent); delete: drop all fields but keep `_pos` and mark `_deleted`, so an
   older record arriving later cannot resurrect the entity; patch: set/remove the given fields;
4. store the new `_pos`.
Script arguments: position, op, number of set pairs, number of kept fields, the set pairs (name, value),
the kept field names, then the fields to remove.
Because every step is conditional on the position, applying a micro-batch twice (a re-run after a
crash) or replaying old offsets changes nothing. Writes run on executors, `PIPELINE` changes per round
trip (in offset order within each partition, which keeps a stream's versions in order).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import redis

from kafkakit.http_auth import NO_REDIS_AUTH, HttpAuth, access_problem, redis_options
from kafkakit.secrets import masked
from materializers.errors import ViewUnavailable
from materializers.view import Reject as Reject

if TYPE_CHECKING:
    import pyarrow as pa

PIPELINE = 500
APPLIED, SKIPPED, GAP = 1, 0, -1

APPLY_LUA = """
local stored = redis.call('HGET', KEYS[1], '_pos')
local pos, mode = ARGV[1], ARGV[2]
if stored and pos <= stored then return 0 end
local nset, nkeep = tonumber(ARGV[3]), tonumber(ARGV[4])
local first_keep = 5 + 2 * nset
if mode == 'patch' then
  local expected = (stored and tonumber(stored) or 0) + 1
  if tonumber(pos) ~= expected then return -1 end
else
  local kept = {}
  if stored and mode == 'upsert' then
    for j = first_keep, first_keep + nkeep - 1 do
      local value = redis.call('HGET', KEYS[1], ARGV[j])
      if value then
        kept[#kept + 1] = ARGV[j]
        kept[#kept + 1] = value
      end
    end
  end
  if stored then redis.call('DEL', KEYS[1]) end
  if #kept > 0 then redis.call('HSET', KEYS[1], unpack(kept)) end
end
-- one HSET / HDEL per change: each redis.call from Lua costs about as much as the field it writes
if mode == 'delete' then
  redis.call('HSET', KEYS[1], '_pos', pos, '_deleted', '1')
else
  redis.call('HSET', KEYS[1], '_pos', pos, unpack(ARGV, 5, first_keep - 1))
end
if first_keep + nkeep <= #ARGV then
  redis.call('HDEL', KEYS[1], unpack(ARGV, first_keep + nkeep, #ARGV))
end
return 1
"""

_LEN = struct.Struct(">I")

REJECT_DDL = "topic string, partition int, offset long, error string"
REJECT_FIELDS = ("topic", "partition", "offset", "error")


def reject_schema() -> pa.Schema:
    """REJECT_DDL in Arrow (built on call: pyarrow is imported only where Arrow is used)."""
    import pyarrow as pa

    return pa.schema(
        [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("error", pa.string())]
    )


@dataclass(frozen=True, slots=True)
class RedisCache:
    url: str
    prefix: str
    # The login and TLS settings besides the URL's (REDIS_USERNAME, REDIS_PASSWORD, REDIS_CA_FILE, ...;
    # kafkakit.http_auth): a `rediss://` URL with REDIS_CA_FILE verifies the server against that CA.
    auth: HttpAuth = NO_REDIS_AUTH

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(
            self.url, socket_connect_timeout=5, socket_timeout=30, **redis_options(self.auth)
        )

    def check(self) -> None:
        """Fail fast, before anything is written, when Redis does not answer or refuses the login."""
        try:
            self.client().ping()
        except redis.RedisError as exc:
            # WRONGPASS, NOAUTH, NOPERM (redis-py's errors hold no secret) or a failed TLS handshake
            if refused := access_problem("Redis", self.url, self.auth, error=exc):
                raise ViewUnavailable(str(refused)) from None
            raise ViewUnavailable(
                f"Redis at {masked(self.url)} does not answer ({exc}); start Redis or point REDIS_URL at it"
            ) from exc

    def key(self, entity: str) -> str:
        return f"{self.prefix}:{entity}"

    def apply_partition(self, rows: Iterable[Mapping[str, Any]]) -> Iterator[Reject]:
        """Executor side: apply changes in order, `PIPELINE` per round trip; yield the ones that hit a gap.

        Chunk n+1 is sent before chunk n's replies are read, so Redis runs one chunk while this
        worker encodes the next (faster than redis-py's pipeline, which waits for the replies).
        """
        client = self.client()
        sha = client.script_load(APPLY_LUA)
        conn: Any = client.connection_pool.get_connection()  # redis-py leaves its methods untyped
        try:
            in_flight: list[Mapping[str, Any]] = []
            source = iter(rows)
            while chunk := list(islice(source, PIPELINE)):
                conn.send_packed_command(conn.pack_commands([self._command(sha, row) for row in chunk]))
                yield from self._gaps(conn, in_flight)
                in_flight = chunk
            yield from self._gaps(conn, in_flight)
        except BaseException:
            conn.disconnect()  # replies may be left unread on it
            raise
        finally:
            client.connection_pool.release(conn)

    def apply_arrow(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """`apply_partition` for `DataFrame.mapInArrow`: Arrow batches in, reject batches out.

        Rows with a non-null `error` (a decoder's error rows, when the job applies the decoded frame
        without splitting it first) are rejected with that error and not applied.

        Arrow hands the Python worker whole columns, which costs a fraction of unpickling one Row
        per change (a map column arrives as (key, value) pairs).
        """
        import pyarrow as pa

        undecoded: list[Reject] = []

        def changes() -> Iterator[dict[str, Any]]:
            for batch in batches:
                for row in batch.to_pylist():
                    if row.get("error") is None:
                        yield row
                    else:  # a decoder's error row (the job's one-pass path): refused, never applied
                        undecoded.append(_reject(row, row["error"]))

        rejects = [*self.apply_partition(changes()), *undecoded]
        yield pa.RecordBatch.from_pylist(
            [dict(zip(REJECT_FIELDS, r, strict=True)) for r in rejects], schema=reject_schema()
        )

    def _command(self, sha: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
        sets = {k: v for k, v in dict(row["set_fields"] or ()).items() if v is not None}
        keep = list(row["keep_fields"] or ())
        args: list[str] = [row["position"], row["op"], str(len(sets)), str(len(keep))]
        for name, value in sets.items():
            args += [name, value]
        return ("EVALSHA", sha, 1, self.key(row["entity"]), *args, *keep, *(row["del_fields"] or ()))

    @staticmethod
    def _gaps(conn: Any, rows: list[Mapping[str, Any]]) -> Iterator[Reject]:
        for row in rows:
            if conn.read_response() == GAP:
                yield _reject(
                    row,
                    f"version gap: {row['entity']} at {int(row['position'])} but the cache has not seen the version before it",
                )

    # --- reads (tests, verify) -----------------------------------------------------------------

    def read(self, entity: str) -> dict[str, str] | None:
        """The entity's fields, or None if absent or deleted."""
        raw: dict[bytes, bytes] = self.client().hgetall(self.key(entity))  # type: ignore[assignment]
        if not raw or raw.get(b"_deleted") == b"1":
            return None
        return {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"_")}

    def position(self, entity: str) -> str | None:
        value = self.client().hget(self.key(entity), "_pos")
        return value.decode() if isinstance(value, bytes) else value

    def entities(self) -> dict[str, dict[str, str]]:
        """Every live entity (deleted ones omitted)."""
        client = self.client()
        found: dict[str, dict[str, str]] = {}
        for key in client.scan_iter(match=f"{self.prefix}:*", count=500):
            entity = (key.decode() if isinstance(key, bytes) else key)[len(self.prefix) + 1 :]
            value = self.read(entity)
            if value is not None:
                found[entity] = value
        return found

    def clear(self) -> int:
        client = self.client()
        keys = list(client.scan_iter(match=f"{self.prefix}:*", count=500))
        return int(client.delete(*keys)) if keys else 0

    # --- snapshots (the job is stopped: nothing writes the prefix meanwhile) -------------------

    def dump_to(self, path: Path) -> int:
        """Write every key under the prefix (Redis DUMP payloads, keyed by entity) to `path`."""
        client = self.client()
        written = 0
        with path.open("wb") as out:
            chunk: list[bytes] = []
            for key in client.scan_iter(match=f"{self.prefix}:*", count=1000):
                chunk.append(key)
                if len(chunk) >= PIPELINE:
                    written += self._dump_chunk(client, chunk, out)
                    chunk = []
            written += self._dump_chunk(client, chunk, out)
        return written

    def _dump_chunk(self, client: redis.Redis, keys: list[bytes], out: IO[bytes]) -> int:
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.dump(key)
        written = 0
        for key, payload in zip(keys, pipe.execute(), strict=True):
            if payload is not None:  # deleted between SCAN and DUMP
                out.write(pack_entry(key[len(self.prefix) + 1 :], payload))
                written += 1
        return written

    def restore_from(self, path: Path) -> int:
        """Replace everything under the prefix with the keys dumped to `path`."""
        self.clear()
        client = self.client()
        pipe = client.pipeline(transaction=False)
        restored = 0
        for entity, payload in unpack_entries(path.read_bytes()):
            pipe.restore(self.key(entity.decode()), 0, payload, replace=True)
            restored += 1
            if restored % PIPELINE == 0:
                pipe.execute()
        pipe.execute()
        return restored


def _reject(row: Mapping[str, Any], error: str) -> Reject:
    return (row["src_topic"], row["src_partition"], row["src_offset"], error)


def pack_entry(entity: bytes, payload: bytes) -> bytes:
    """One dump-file entry: length-prefixed entity, then length-prefixed DUMP payload (pure)."""
    return _LEN.pack(len(entity)) + entity + _LEN.pack(len(payload)) + payload


def unpack_entries(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The (entity, payload) entries of a dump file (pure); a truncated file raises ValueError."""
    at = 0
    while at < len(data):
        fields = []
        for _ in range(2):
            if at + _LEN.size > len(data):
                raise ValueError(f"Redis dump file is truncated at byte {at}; take a new snapshot")
            (size,) = _LEN.unpack_from(data, at)
            at += _LEN.size
            if at + size > len(data):
                raise ValueError(f"Redis dump file is truncated at byte {at}; take a new snapshot")
            fields.append(data[at : at + size])
            at += size
        yield fields[0], fields[1]
