"""Generations of a materializer's views, and the pointers readers resolve to find the live one.

A generation is one complete set of views: Redis keys under a prefix, a search index directory,
Delta tables and the checkpoint that fed them. The original layout is generation "" (prefix
`<redis_prefix>:<name>`, directories straight under the job dir); a rebuild creates `g<hex>` beside
it (prefix `<base>@g<hex>`, directories under `<job dir>/generations/g<hex>/`).

Pointers (each replaced atomically, so a reader sees the old or the new generation, never neither):
- `<job dir>/live.json` — {"generation", "redis_prefix", "view_dir"}: written to a temp file and
  `rename`d over the old one; the search index and Delta paths are resolved through it;
- Redis key `<base>@live` — the live prefix (a single SET), for readers that only talk to Redis;
- with the OpenSearch search backend, the alias `<redis prefix>-<name>` — moved to the generation's
  index in one `_aliases` request.
No pointer = generation "". The two pointers are switched one after the other (file, then Redis):
a reader that mixes stores may for a moment see the new Delta and the old cache, both complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import redis

from materializers.config import RunConfig
from materializers.errors import ViewUnavailable
from materializers.materializer import Materializer
from materializers.runtime.job import JobPlan

POINTER_FILE = "live.json"
REDIS_POINTER = "@live"


def live_generation(job_dir: Path) -> str:
    pointer = job_dir / POINTER_FILE
    return str(json.loads(pointer.read_text())["generation"]) if pointer.is_file() else ""


def resolve(spec: Materializer, config: RunConfig) -> JobPlan:
    """The plan of the live generation (what `start`, `verify`, `snapshot` and `restore` act on)."""
    return JobPlan.of(spec, config, live_generation(config.job_dir(spec.name)))


def live_redis_prefix(client: redis.Redis, base_prefix: str) -> str:
    """What a Redis-only reader does: GET `<base>@live`, falling back to the base prefix."""
    found = client.get(base_prefix + REDIS_POINTER)
    return found.decode() if isinstance(found, bytes) else (found or base_prefix)


def switch(plan: JobPlan) -> None:
    """Make `plan`'s generation the live one: pointer file (atomic rename), then the Redis key."""
    plan.job_dir.mkdir(parents=True, exist_ok=True)
    body = {"generation": plan.generation, "redis_prefix": plan.redis_prefix, "view_dir": str(plan.view_dir)}
    tmp = plan.job_dir / f".{POINTER_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(body))
    tmp.replace(plan.job_dir / POINTER_FILE)
    remote = plan.opensearch()
    if remote is not None:  # OpenSearch readers resolve the alias, switched atomically
        remote.switch_alias()
    try:
        plan.cache().client().set(plan.base_prefix + REDIS_POINTER, plan.redis_prefix)
    except redis.RedisError as exc:
        raise ViewUnavailable(
            f"switched {plan.job_dir / POINTER_FILE} to {plan.generation!r} but could not set the Redis "
            f"pointer {plan.base_prefix + REDIS_POINTER} ({exc}); set it to {plan.redis_prefix!r} by hand"
        ) from exc
