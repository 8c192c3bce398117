"""Where the CLIs' and the demo's log records go: librdkafka's chatter kept off the console.

Every client is built through kafkakit.clients, so librdkafka's lines arrive as records of the
`kafkakit.librdkafka` logger (INFO for its `%5`/`%6` lines, WARNING for `%4`, ERROR for `%3`). The
policy, and why:

- A CLI (`cdc`, `eventstore`, `devstack`) writes its records to stderr at its own level, librdkafka's
  only from WARNING up: a refused connection, a failed authentication or a producer id not yet granted
  explains why a command hangs or fails, so the user sees it as any other warning. librdkafka's INFO
  and NOTICE lines (a broker's idle connection closed, unserved events purged at shutdown) say nothing
  a user can act on and never reach the console, not even with `--verbose`. Where a CLI's stderr is a
  file (the demo starts the processor and the materializers so), that file is its log.
- The demo narrates on the console and writes every record at INFO and above, librdkafka's included,
  to its log file (demo-report/logs/demo.log, beside the processor's and the materializers'); none of
  librdkafka's reach the console, whatever their level — the demo's own checks report what failed.
  Other loggers' warnings still reach stderr, as Python's last-resort handler printed them before.

Both use `logging.basicConfig`, so the first configuration in a process wins (under pytest, its own).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

from kafkakit.clients import LIBRDKAFKA_LOGGER

NEVER = logging.CRITICAL + 1
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def from_librdkafka(record: logging.LogRecord) -> bool:
    return record.name == LIBRDKAFKA_LOGGER or record.name.startswith(LIBRDKAFKA_LOGGER + ".")


def librdkafka_at_least(level: int) -> Callable[[logging.LogRecord], bool]:
    """A handler filter: librdkafka's records pass from `level` up, every other record passes."""

    def keep(record: logging.LogRecord) -> bool:
        return record.levelno >= level or not from_librdkafka(record)

    return keep


def configure_cli_logging(level: int, *, fmt: str = logging.BASIC_FORMAT) -> None:
    """stderr at `level` (the CLI's own `--verbose` or not); librdkafka's records only from WARNING up."""
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter(fmt))
    console.addFilter(librdkafka_at_least(logging.WARNING))
    logging.basicConfig(level=level, handlers=[console])


def configure_demo_logging(log_file: Path) -> None:
    """Every record from INFO up to `log_file`; other loggers' warnings to stderr, librdkafka's never."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(log_file, encoding="utf-8")
    to_file.setFormatter(logging.Formatter(FILE_FORMAT))
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.WARNING)
    console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    console.addFilter(librdkafka_at_least(NEVER))
    logging.basicConfig(level=logging.INFO, handlers=[to_file, console])
