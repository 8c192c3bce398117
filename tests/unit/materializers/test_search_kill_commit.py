"""The search view's Tantivy index after its driver is killed -9 in the middle of a commit (a real
index on disk, the view's own `SearchIndex.apply_batch`, in child processes the test SIGKILLs).

A commit writes each touched segment's delete bitset (`<segment>.<opstamp>.del`) and only then
swaps meta.json. Killed between the two, the driver leaves a `.del` file no commit references; the
restarted job re-runs the batch from the same meta.json, so with the same opstamps, and writes that
very name again: Tantivy creates files exclusively, and the re-run died on FileAlreadyExists. The
test kills the child as soon as a new `.del` file appears (the window until meta.json is renamed is
a few fsyncs long: the kill lands in it nearly every time, and a miss is retried), checks that the
index was left exactly in that state, then re-runs the batch in a fresh process.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from search_kill_child import APP_ID, ENTITIES, TEXT_FIELDS, expected_documents

from materializers.views.search.tantivy import SearchIndex

CHILD = Path(__file__).with_name("search_kill_child.py")
ATTEMPTS = 10  # kills that miss the window (meta.json already renamed) are retried from scratch
CHILD_TIMEOUT_S = 30.0

FileId = tuple[str, int, int]  # name, inode, ctime: a .del file removed and written again is new


def start(index: Path, last: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(index), str(last)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(index: Path, last: int) -> int:
    """Run the child to batch `last` unharmed; it must succeed. Returns the index's last batch."""
    done = subprocess.run(
        [sys.executable, str(CHILD), str(index), str(last)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert done.returncode == 0, f"the re-run failed (exit {done.returncode}):\n{done.stderr}"
    return int(done.stdout)


def del_files(index: Path) -> set[FileId]:
    found = set()
    with os.scandir(index) as entries:
        for entry in entries:
            if entry.name.endswith(".del"):
                try:
                    st = entry.stat()
                except FileNotFoundError:  # removed by the child's garbage collection meanwhile
                    continue
                found.add((entry.name, st.st_ino, st.st_ctime_ns))
    return found


def kill_at_new_del_file(child: subprocess.Popen[str], index: Path, seen: set[FileId]) -> bool:
    """SIGKILL the child as soon as a `.del` file not in `seen` exists; False if it finished first.
    A child that dies by itself fails the test with its stderr (the FileAlreadyExists of the bug)."""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while child.poll() is None and time.monotonic() < deadline:
        if index.exists() and del_files(index) - seen:
            child.kill()
            break
    else:
        if child.returncode is None:
            child.kill()
            child.communicate()
            pytest.fail(f"no new .del file within {CHILD_TIMEOUT_S} s")
    _out, err = child.communicate()
    if child.returncode == -9:
        return True
    assert child.returncode == 0, f"the child failed (exit {child.returncode}):\n{err}"
    return False


def referenced_del_files(index: Path) -> set[str]:
    meta = json.loads((index / "meta.json").read_text())
    return {
        f"{s['segment_id'].replace('-', '')}.{s['deletes']['opstamp']}.del"
        for s in meta["segments"]
        if s["deletes"]
    }


def stray_del_files(index: Path) -> set[str]:
    """`.del` files no commit references: what a kill between a `.del` file and meta.json leaves."""
    return {name for name, _ino, _ctime in del_files(index)} - referenced_del_files(index)


def assert_holds(index: Path, last: int) -> None:
    """The index opens, its batch marker is `last` and it holds exactly batches 0..last: each
    entity's one document (live or tombstone) plus the batch and high-water markers, the live ones
    as the model says."""
    view = SearchIndex(path=index, text_fields=TEXT_FIELDS)
    assert view.last_batch(APP_ID) == last
    assert view.live_documents() == expected_documents(last)
    assert view.index().searcher().num_docs == (ENTITIES + 2 if last >= 0 else 0)


@pytest.mark.parametrize("kills", [1, 2], ids=["killed-once", "rerun-killed-again"])
def test_batch_killed_between_its_del_file_and_meta_json_reruns_exactly(tmp_path: Path, kills: int) -> None:
    pristine = tmp_path / "pristine"
    assert run(pristine, 0) == 0  # batch 0 committed: every entity has a document in one segment
    index = tmp_path / "search"
    for _attempt in range(ATTEMPTS):
        shutil.rmtree(index, ignore_errors=True)
        shutil.copytree(pristine, index)
        strays: list[set[str]] = []
        for _kill in range(kills):  # batch 1 updates and deletes batch 0's documents: a .del file
            if not kill_at_new_del_file(start(index, 1), index, del_files(index)):
                break  # the child committed batch 1 before the kill
            if not (stray := stray_del_files(index)):
                break  # killed after meta.json was renamed: batch 1 is committed
            strays.append(stray)
        else:
            break
    else:
        pytest.fail(f"no kill landed between a .del file and meta.json in {ATTEMPTS} attempts")

    # The state a kill -9 mid-commit leaves: batch 1's .del file on disk, meta.json still batch 0's.
    assert_holds(index, 0)
    assert all(len(s) == 1 for s in strays) and strays[0] == strays[-1], strays

    assert run(index, 1) == 1
    assert_holds(index, 1)
    # The re-run wrote the very name the killed run left (same segment, same opstamp): the collision.
    assert strays[0] <= referenced_del_files(index)
    assert not stray_del_files(index)

    assert run(index, 3) == 3  # and the job goes on
    assert_holds(index, 3)


def test_streaming_driver_killed_again_and_again_resumes_exactly(tmp_path: Path) -> None:
    """A job killed 16 times, half at a .del file, half after a random delay (while starting, mid-batch,
    mid-commit); each restart resumes at the killed batch. After every kill the index holds exactly its
    committed batches; after a last clean run, exactly every batch once."""
    index = tmp_path / "search"
    rng = random.Random(20261127)
    killed_mid_commit = 0
    for cycle in range(16):
        child = start(index, 1_000_000)
        if cycle % 2:
            time.sleep(rng.uniform(0.1, 0.6))
            child.kill()
            _out, err = child.communicate()
            assert child.returncode == -9, f"the child failed (exit {child.returncode}):\n{err}"
        else:
            assert kill_at_new_del_file(child, index, del_files(index) if index.exists() else set())
        if not (index / "meta.json").exists():
            continue  # killed before its first commit
        killed_mid_commit += bool(stray_del_files(index))
        view = SearchIndex(path=index, text_fields=TEXT_FIELDS)
        assert_holds(index, view.last_batch(APP_ID))
    assert killed_mid_commit, "no kill landed between a .del file and meta.json"

    last = SearchIndex(path=index, text_fields=TEXT_FIELDS).last_batch(APP_ID)
    assert run(index, last + 2) == last + 2
    assert_holds(index, last + 2)
    assert not stray_del_files(index)
