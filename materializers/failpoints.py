"""Test hooks that hold a driver at a named step so a test can kill it there (RunConfig.failpoint,
env MATERIALIZERS_FAILPOINT = "<step>:<marker path>[:until-stop]"). Unset, every hook returns at once.

Plain: touch the marker, then block (to be killed mid-batch). `until-stop`: hold until a stop is
requested (the job's stop file), then go on — so a test can ask for a stop while a batch is in flight.
A marker that exists already means the step was held once: later runs pass it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# A failpoint's old name -> the step it now means (tests, scripts): the last one of a batch.
ALIASES = {"after-warehouse": "after-views"}
HOLD_S = 300.0


def hold(failpoint: str, step: str, note: str, stop_file: Path | None = None) -> None:
    """Block here if `failpoint` names `step` and its marker is not written yet; `note` goes in it."""
    name, _, rest = failpoint.partition(":")
    marker, _, mode = rest.partition(":")
    if ALIASES.get(name, name) != step or not marker or Path(marker).exists():
        return
    Path(marker).write_text(f"{os.getpid()} {note}")
    deadline = time.monotonic() + HOLD_S
    while time.monotonic() < deadline and not (mode == "until-stop" and stop_file and stop_file.exists()):
        time.sleep(0.2)
