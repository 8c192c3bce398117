"""Materializers for tests: a `materializers start` driver per call, in a process group the test owns,
with state of its own, waited on until caught up, stopped gracefully or crashed, cleaned up afterwards.

A driver runs as a process, not in the test's process, so a test can `kill -9` it with its JVM
(`ProcessGroups.crash`) and see what a crashed production driver leaves: a batch planned but not
committed, views written halfway, a restart that replays from the checkpoint.

Guarantees:
- bad input fails in `start`, before any process starts: a `module:attr` that does not import or is not
  a `Materializer`, a `Materializer` object no module holds (the driver process must import it), a view
  that does not implement the protocol or whose store does not answer, a topic that does not exist —
  each error names the cause and the fix (the materializers package's own checks, run here);
- every run has its own home (checkpoint, status, local view files), Redis prefix and dead-letter
  topic, so tests sharing a stack never share a view; `restart` keeps all three (it continues from the
  checkpoint), `close` removes them: home, the Redis keys under the prefix, the dead-letter topic;
- `wait_caught_up` returns once the checkpoint's last committed batch reached the topic's end offsets
  as of the call (or the offsets given): every record produced before the call is in the views.
Assumptions: the driver reads the endpoints the test uses (a local, container or external stack
whose Kafka and Redis this machine reaches), and the materializer's views are reachable from here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devstack.crash import ProcessGroups, crash_group, wait_until
from devstack.processes import group_members
from devstack.session import StackHandle
from materializers import BadMaterializer, JobPlan, Materializer, RunConfig
from materializers.runtime.checkpoint import Committed, Offsets, committed, lag

LOG_TAIL_LINES = 40


@dataclass
class MaterializerRun:
    """One materializer started for a test: what it reads and writes (`plan`: topic, checkpoint, Redis
    prefix, dead-letter topic, job directory), how it was started, and its driver process."""

    plan: JobPlan
    reference: str  # module:attr or a name, as the driver process loads it
    argv: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes]
    restarts: int = 0

    @property
    def name(self) -> str:
        return self.plan.spec.name

    def committed(self) -> Committed:
        """What the checkpoint says was committed: the last batch and the offsets it reached."""
        return committed(self.plan.checkpoint)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if not self.log.is_file():
            return "(no output)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class MaterializerFactory:
    """`start(LOW_STOCK, topic=...)` -> a running driver; `wait_caught_up`, `stop`, `crash`, `restart`.

    `handle`: the stack whose endpoints the drivers get; `groups`: the test's process groups (so
    `process_groups.crash(run.process)` works too); `root`: where homes and logs go.
    """

    handle: StackHandle
    groups: ProcessGroups
    root: Path
    made: list[MaterializerRun] = field(default_factory=list)

    def start(
        self,
        materializer: Materializer | str,
        *,
        topic: str | None = None,
        table: str | None = None,
        start: str = "earliest",
        views: Sequence[str] = (),
        trigger: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> MaterializerRun:
        """Start `materializer` (an object defined at module level, or `module:attr` / a name) as a
        `materializers start` process reading `topic` (default: its own) from `start` (earliest, latest
        or offsets JSON; the first run only). `table`: the Postgres table a CDC materializer mirrors
        (what `verify` reads); `views`: keep only these; `trigger`: the batch interval (default: the
        job's); `env`: more environment for the driver."""
        reference, spec = resolve(materializer)
        run_id = uuid.uuid4().hex[:10]
        home = self.root / f"{spec.name}-{run_id}"
        source = topic or spec.default_topic
        settings = {
            "MATERIALIZERS_HOME": str(home),
            "MATERIALIZERS_REDIS_PREFIX": f"matt-{run_id}",
            "MATERIALIZERS_TOPIC": source,
            # Its own dead letters, named after the topic (a topic factory's `<name>.*` clean-up finds it).
            "MATERIALIZERS_DLQ_TOPIC": f"{source}.dlq-{run_id}",
            **({"MATERIALIZERS_TRIGGER": trigger} if trigger else {}),
            **({"MATERIALIZERS_TABLE": table} if table else {}),
            **({"MATERIALIZERS_VIEWS": ",".join(views)} if views else {}),
        }
        child_env = {
            **os.environ,
            **self.handle.endpoints.as_env(),
            **settings,
            **import_path(reference, os.environ.get("PYTHONPATH", "")),
            **(env or {}),
        }
        plan = checked_plan(spec, RunConfig.from_env(child_env), start)  # the driver's checks, here first
        argv = [sys.executable, "-m", "materializers.cli", "start", reference, "--from", start]
        log = self.root / "logs" / f"{spec.name}-{run_id}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        home.mkdir(parents=True, exist_ok=True)  # also its working directory: Spark's stray files go there
        run = MaterializerRun(
            plan=plan,
            reference=reference,
            argv=argv,
            env=child_env,
            log=log,
            process=self.groups.start(argv, env=child_env, cwd=home, output=log),
        )
        self.made.append(run)
        return run

    def wait_caught_up(
        self, run: MaterializerRun, *, ends: Offsets | None = None, timeout_s: float = 240.0
    ) -> Committed:
        """Wait until `run`'s checkpoint committed a batch at or past `ends` (default: the topic's end
        offsets now), so every record before them is in every view. RuntimeError, with the driver's
        log tail, when it exits first; TimeoutError when it is still behind after `timeout_s`."""
        from materializers.ops.lag import end_offsets

        target = ends if ends is not None else end_offsets(self.bootstrap, run.plan.topic)

        def caught_up() -> bool:
            done = run.committed()
            return done.batch_id >= 0 and lag(done.offsets, target) == 0

        what = f"materializer {run.name} caught up with {target}"
        try:
            wait_until(caught_up, timeout_s=timeout_s, what=what, process=run.process, interval_s=0.25)
        except (RuntimeError, TimeoutError) as exc:
            raise type(exc)(
                f"{exc} (last committed: {run.committed()}); its log ({run.log}):\n{run.log_tail()}"
            ) from None
        return run.committed()

    def stop(self, run: MaterializerRun, *, timeout_s: float = 180.0) -> int:
        """Graceful stop: SIGTERM, the driver finishes its running batch, checkpoints and exits; waits
        until its whole process group (the JVM too) is gone. Returns the exit status (0: clean).
        Still running after `timeout_s`: killed with its group, and TimeoutError."""
        if run.process.poll() is None:
            run.process.send_signal(signal.SIGTERM)
        try:
            status = run.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            crash_group(run.process)
            raise TimeoutError(
                f"materializer {run.name} did not stop within {timeout_s:.0f} s of SIGTERM and was killed; "
                f"its log ({run.log}):\n{run.log_tail()}"
            ) from None
        pgid = run.process.pid
        wait_until(lambda: not group_members(pgid), timeout_s=30, what=f"process group {pgid} gone")
        return status

    def crash(self, run: MaterializerRun) -> int:
        """kill -9 of the driver's whole process group (the JVM too), then a wait until it is gone."""
        return self.groups.crash(run.process)

    def restart(self, run: MaterializerRun) -> MaterializerRun:
        """Start `run`'s driver again, with the same home, checkpoint and Redis prefix: it continues
        from its checkpoint. The previous driver must have exited (`stop` or `crash`)."""
        if run.process.poll() is None or group_members(run.process.pid):
            raise RuntimeError(
                f"materializer {run.name} (pid {run.process.pid}) still runs; stop or crash it before a restart"
            )
        home = run.plan.config.home
        run.process = self.groups.start(run.argv, env=run.env, cwd=home, output=run.log)
        run.restarts += 1
        return run

    @property
    def bootstrap(self) -> str:
        return self.handle.endpoints.kafka_bootstrap_servers

    def close(self) -> None:
        """Kill the drivers still running, then delete every run's Redis keys, dead-letter topic and home."""
        for run in self.made:
            if run.process.poll() is None or group_members(run.process.pid):
                crash_group(run.process)
        if self.made:
            self._delete_redis_keys([run.plan.config.redis_prefix for run in self.made])
            self._delete_topics([run.plan.dlq_topic for run in self.made])
        for run in self.made:
            shutil.rmtree(run.plan.config.home, ignore_errors=True)
        self.made.clear()

    def _delete_redis_keys(self, prefixes: list[str]) -> None:
        import redis

        client = redis.Redis.from_url(self.handle.endpoints.redis_url)
        try:
            for prefix in prefixes:  # every generation's keys are `<prefix>:<name>...`
                doomed = list(client.scan_iter(match=f"{prefix}:*", count=1000))
                for at in range(0, len(doomed), 1000):
                    client.unlink(*doomed[at : at + 1000])
        finally:
            client.close()

    def _delete_topics(self, names: list[str]) -> None:
        from kafkakit.clients import admin_client

        with admin_client({"bootstrap.servers": self.bootstrap}) as admin:
            doomed = sorted(set(names) & set(admin.list_topics(timeout=30).topics))
            for future in (admin.delete_topics(doomed, operation_timeout=30) if doomed else {}).values():
                future.exception(30)  # waits; a topic already gone is not this teardown's failure


def resolve(materializer: Materializer | str) -> tuple[str, Materializer]:
    """(how the driver process names it, the checked Materializer); BadMaterializer / BadView say why not."""
    from materializers.catalog import checked, lookup

    if isinstance(materializer, str):
        return materializer, lookup(materializer)
    if not isinstance(materializer, Materializer):
        raise BadMaterializer(
            f"materializer_factory.start got a {type(materializer).__name__}; pass a Materializer defined "
            "at module level, or 'module:attr' naming one"
        )
    return reference_of(materializer), checked(materializer, materializer.name)


def reference_of(spec: Materializer) -> str:
    """`module:attr` of a module-level name bound to `spec` (the driver imports it from there)."""
    found = sorted(
        f"{name}:{attr}"
        for name, module in list(sys.modules.items())
        if name != "__main__" and module is not None
        for attr, value in list(getattr(module, "__dict__", {}).items())
        if value is spec
    )
    if not found:
        raise BadMaterializer(
            f"materializer {spec.name!r} is not bound to a name at module level of any imported module, so "
            "the driver process cannot import it; define it at module level (e.g. in mypkg/views.py) and "
            "pass it, or pass 'mypkg.views:NAME'"
        )
    return found[0]


def import_path(reference: str, pythonpath: str) -> dict[str, str]:
    """PYTHONPATH for a driver that must import `reference`'s module from where this process did (a test
    module, a project not installed); {} when the interpreter finds it anyway (site-packages)."""
    module = sys.modules.get(reference.partition(":")[0]) if ":" in reference else None
    where = getattr(module, "__file__", None)
    if module is None or where is None:
        return {}
    path = Path(where).resolve()
    depth = module.__name__.count(".") + (2 if path.name == "__init__.py" else 1)
    root = str(path.parents[depth - 1])
    known = {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    parts = [p for p in pythonpath.split(os.pathsep) if p]
    if root in known or root in parts:
        return {}
    return {"PYTHONPATH": os.pathsep.join([root, *parts])}


def checked_plan(spec: Materializer, config: RunConfig, start: str) -> JobPlan:
    """The plan the driver will run, after the checks `materializers start` makes before its Spark
    session: the views built and checked against the protocol, their stores reachable, the topic
    there, the start position valid for its partitions."""
    from kafkakit.positions import parse_start
    from materializers.decode import positions
    from materializers.ops import generations
    from materializers.runtime.kafka_topics import topic_partitions

    plan = generations.resolve(spec, config)
    for view in plan.views():
        view.check()
    partitions = topic_partitions(config.endpoints.kafka_bootstrap_servers, plan.topic)
    positions.spark_start_options(parse_start(start), {plan.topic: partitions})
    return plan
