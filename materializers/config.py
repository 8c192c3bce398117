"""Settings of a materializer run (frozen); `from_env` is the only place the environment is read.

Precedence: CLI flags (`with_overrides`) > environment > defaults.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkakit.errors import ConfigError
from kafkakit.settings import Endpoints

ENV_HOME = "MATERIALIZERS_HOME"
ENV_MASTER = "MATERIALIZERS_MASTER"
# The Spark master every Spark tool of a deployment shares (the cluster stack exports it).
ENV_SPARK_MASTER = "SPARK_MASTER_URL"
# Local mode with a thread per core of this host; a cluster is named by URL.
DEFAULT_MASTER = "local[*]"
ENV_TRIGGER = "MATERIALIZERS_TRIGGER"
DEFAULT_TRIGGER = "250 milliseconds"
ENV_OPTIMIZE_EVERY = "MATERIALIZERS_OPTIMIZE_EVERY"
ENV_FAILPOINT = "MATERIALIZERS_FAILPOINT"
ENV_TOPIC = "MATERIALIZERS_TOPIC"
ENV_DLQ_TOPIC = "MATERIALIZERS_DLQ_TOPIC"
ENV_TABLE = "MATERIALIZERS_TABLE"
ENV_REDIS_PREFIX = "MATERIALIZERS_REDIS_PREFIX"
ENV_VIEWS = "MATERIALIZERS_VIEWS"
ENV_MAX_OFFSETS = "MATERIALIZERS_MAX_OFFSETS_PER_TRIGGER"
ENV_DRIVER_ROWS = "MATERIALIZERS_WAREHOUSE_DRIVER_ROWS"
DRIVER_ROWS = 50_000
ENV_SMALL_BATCH_ROWS = "MATERIALIZERS_SMALL_BATCH_ROWS"
# The driver batch bounds' default: sized per job (runtime/batch_size.py), never below DRIVER_ROWS. A live
# driver whose batches passed a lower bound (10,000) took the executors' path, seconds slower per
# batch on a small machine, so its next batch was larger still and it fell further behind; at
# 50,000 a live driver's batches stay on the driver's path and it catches up.
AUTO = "auto"
ENV_SEARCH_BACKEND = "MATERIALIZERS_SEARCH_BACKEND"
SEARCH_BACKENDS = ("tantivy", "opensearch")
ENV_OPENSEARCH_URL = "OPENSEARCH_URL"
OPENSEARCH_URL = "http://127.0.0.1:19200"  # the local stack's (STACK_OPENSEARCH=1)
ENV_OPENSEARCH_REPLICAS = "MATERIALIZERS_OPENSEARCH_REPLICAS"
VIEWS = ("cache", "search", "warehouse")  # the built-in views, in the order `parse_views` keeps
_VIEW_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """Where state lives and how a job runs.

    `home` holds, per job: the Spark checkpoint, the Tantivy index, the Delta tables and the status
    file. `failpoint` ("<step>:<marker path>") makes the driver touch the marker and block at that
    step; it exists so tests can kill -9 a driver mid-batch deterministically, and is never set in
    production.
    """

    endpoints: Endpoints = field(default_factory=Endpoints)
    home: Path = Path(".materializers")
    master: str = DEFAULT_MASTER
    # A batch starts every quarter second, or at once when the last took longer: a steady live batch
    # of the three views takes about that long, so batches run about back to back and a change no
    # longer waits up to a longer trigger's interval for the next one to start. The price is about
    # twice the driver's CPU under load; a shorter trigger only adds idle offset requests
    # (bench/results/history.md, "the job's default trigger").
    trigger: str = DEFAULT_TRIGGER
    optimize_every: int = 50
    failpoint: str = ""
    topic: str = ""  # input topic; "" = the materializer's default
    dlq_topic: str = ""  # "" = <input topic>.dlq
    table: str = ""  # Postgres table `verify` compares a CDC view with; "" = the default
    redis_prefix: str = "mat"
    checkpoint: str = ""  # "" = <home>/<name>/checkpoint
    # which of the materializer's views this run keeps; () = all of them (the plan checks the names)
    views: tuple[str, ...] = ()
    max_offsets_per_trigger: int = 0  # records per micro-batch; 0 = job.batch_cap decides
    # warehouse batches of at most this many changes are written from the driver (delta-rs), larger
    # ones by Spark; 0 = always Spark (a cluster whose driver cannot reach the table's path);
    # None = auto (runtime/batch_size.py: sized by the topic's record bytes and the driver's memory)
    warehouse_driver_rows: int | None = None
    # a batch of at most this many records is applied whole from the driver: ONE Spark job decodes
    # it into Arrow, every view is written from there (a live stream's batches, where each further
    # Spark job costs latency); larger batches (a backfill) spread over the executors; 0 = never;
    # None = auto, as above
    small_batch_rows: int | None = None
    # the search view's store: an embedded Tantivy index on the driver, or an OpenSearch cluster
    search_backend: str = "tantivy"
    opensearch_url: str = OPENSEARCH_URL
    # replicas of a new OpenSearch index; None = what the cluster can place (0 on one node, else 1)
    opensearch_replicas: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunConfig:
        env = os.environ if environ is None else environ
        every = env.get(ENV_OPTIMIZE_EVERY, "50")
        if not every.isdigit() or int(every) < 1:
            raise ConfigError(f"{ENV_OPTIMIZE_EVERY}={every!r} must be a positive integer (batches)")
        return cls(
            endpoints=Endpoints.from_env(env),
            home=Path(env.get(ENV_HOME) or ".materializers"),
            master=env.get(ENV_MASTER) or env.get(ENV_SPARK_MASTER) or DEFAULT_MASTER,
            trigger=normalize_trigger(env.get(ENV_TRIGGER) or DEFAULT_TRIGGER),
            optimize_every=int(every),
            failpoint=env.get(ENV_FAILPOINT, ""),
            topic=env.get(ENV_TOPIC, ""),
            dlq_topic=env.get(ENV_DLQ_TOPIC, ""),
            table=env.get(ENV_TABLE, ""),
            redis_prefix=env.get(ENV_REDIS_PREFIX) or "mat",
            views=parse_views(env[ENV_VIEWS]) if env.get(ENV_VIEWS) else (),
            max_offsets_per_trigger=parse_max_offsets(env.get(ENV_MAX_OFFSETS) or "0"),
            warehouse_driver_rows=parse_driver_rows(env.get(ENV_DRIVER_ROWS) or AUTO),
            small_batch_rows=parse_driver_rows(env.get(ENV_SMALL_BATCH_ROWS) or AUTO),
            search_backend=parse_search_backend(env.get(ENV_SEARCH_BACKEND) or "tantivy"),
            opensearch_url=env.get(ENV_OPENSEARCH_URL) or OPENSEARCH_URL,
            opensearch_replicas=parse_replicas(env.get(ENV_OPENSEARCH_REPLICAS) or ""),
        )

    def with_overrides(self, **flags: str | None) -> RunConfig:
        """CLI flags (None = not given) over env and defaults."""
        given = {k: v for k, v in flags.items() if v is not None}
        unknown = set(given) - {
            "master",
            "trigger",
            "home",
            "topic",
            "dlq_topic",
            "table",
            "redis_prefix",
            "checkpoint",
            "views",
            "max_offsets_per_trigger",
            "warehouse_driver_rows",
            "small_batch_rows",
            "search_backend",
            "opensearch_url",
        }
        if unknown:
            raise ConfigError(f"unknown run setting(s) {sorted(unknown)}")
        typed: dict[str, object] = dict(given)
        if "trigger" in given:
            typed["trigger"] = normalize_trigger(given["trigger"])
        if "views" in given:
            typed["views"] = parse_views(given["views"])
        if "max_offsets_per_trigger" in given:
            typed["max_offsets_per_trigger"] = parse_max_offsets(given["max_offsets_per_trigger"])
        for rows in ("warehouse_driver_rows", "small_batch_rows"):
            if rows in given:
                typed[rows] = parse_driver_rows(given[rows])
        if "search_backend" in given:
            typed["search_backend"] = parse_search_backend(given["search_backend"])
        home = typed.pop("home", None)
        updated = replace(self, **typed)  # type: ignore[arg-type]
        return replace(updated, home=Path(str(home))) if home else updated

    def job_dir(self, name: str) -> Path:
        # Absolute: Delta resolves `delta.`<path>`` identifiers only for absolute paths.
        return (self.home / name).resolve()


_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes"}


def normalize_trigger(text: str) -> str:
    """`1s`, `500ms`, `2m` or Spark's own `1 second`, as Spark's processingTime string."""
    value = text.strip().lower()
    for suffix in ("ms", "s", "m"):
        number = value.removesuffix(suffix)
        if value.endswith(suffix) and number.isdigit():
            return f"{int(number)} {_UNITS[suffix]}"
    parts = value.split()
    if len(parts) == 2 and parts[0].isdigit() and parts[1].rstrip("s") in ("millisecond", "second", "minute"):
        return value
    raise ConfigError(f"trigger {text!r} not understood; write e.g. 1s, 500ms or 2m")


def parse_views(text: str) -> tuple[str, ...]:
    """`cache,warehouse` -> view names, the built-in ones first in canonical order, then a
    materializer's own in the order given; an empty list or a malformed name is refused. Whether
    the materializer has them is the plan's check (`JobPlan.views`): a user view can be named."""
    named = list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    if not named or not all(_VIEW_NAME.fullmatch(v) for v in named):
        raise ConfigError(
            f"views {text!r} not understood; name one or more views separated by commas "
            f"(built-in: {', '.join(VIEWS)}; a materializer's own: see `materializers list`)"
        )
    return (*[v for v in VIEWS if v in named], *[v for v in named if v not in VIEWS])


def parse_max_offsets(text: str) -> int:
    """Records per micro-batch: a non-negative integer (0 = no limit)."""
    if not text.strip().isdigit():
        raise ConfigError(
            f"max offsets per trigger {text!r} must be a non-negative integer (records per batch, 0 = no limit)"
        )
    return int(text)


def parse_driver_rows(text: str) -> int | None:
    """Largest batch applied from the driver: a non-negative integer (0 = always Spark), or `auto`
    (None: sized by the job, see runtime/batch_size.py)."""
    if text.strip() == AUTO:
        return None
    if not text.strip().isdigit():
        raise ConfigError(
            f"driver rows {text!r} must be a non-negative integer (records per batch, 0 = always Spark) "
            f"or {AUTO} (sized by the records' bytes and the driver's memory)"
        )
    return int(text)


def is_local(master: str) -> bool:
    """Whether `master` runs Spark inside the driver (`local`, `local[N]`, `local[*]`)."""
    return master == "local" or master.startswith("local[")


def parse_search_backend(text: str) -> str:
    if text.strip() not in SEARCH_BACKENDS:
        raise ConfigError(
            f"search backend {text!r} not understood; use {' or '.join(SEARCH_BACKENDS)} "
            f"(--search-backend, env {ENV_SEARCH_BACKEND})"
        )
    return text.strip()


def parse_replicas(text: str) -> int | None:
    """Replicas of a new OpenSearch index: a non-negative integer, or empty for the cluster's choice."""
    if not text.strip():
        return None
    if not text.strip().isdigit():
        raise ConfigError(f"{ENV_OPENSEARCH_REPLICAS}={text!r} must be a non-negative integer, or unset")
    return int(text)
