"""The processor's heap settling (heap.py): young cycles freed, survivors frozen, frozen cycles freed by a full pass."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from eventstore.heap import HeapSettler


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def manual_gc() -> Iterator[None]:
    """Only the settler collects during a test, so what it frees is its doing."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def test_settle_frees_young_cycles_and_freezes_survivors() -> None:
    garbage = cycle()
    live = [Node() for _ in range(100)]
    frozen_before = gc.get_freeze_count()
    HeapSettler().settle()
    assert garbage() is None
    assert gc.get_freeze_count() >= frozen_before + len(live)


def test_a_frozen_cycle_waits_for_the_full_pass() -> None:
    settler = HeapSettler()
    ref = cycle()
    node = ref()
    settler.settle()  # the cycle is alive here, so it is frozen
    del node
    gc.collect()
    assert ref() is not None, "a normal collection does not scan frozen objects"
    settler.full()
    assert ref() is None


def test_settle_runs_the_full_pass_when_it_is_due() -> None:
    settler = HeapSettler(full_every_s=0)
    ref = cycle()
    node = ref()
    gc.freeze()
    del node
    settler.settle()
    assert ref() is None


def test_disabled_leaves_the_collector_alone() -> None:
    settler = HeapSettler(enabled=False)
    ref = cycle()
    before = gc.get_freeze_count()
    settler.settle()
    settler.full()
    assert gc.get_freeze_count() == before
    assert ref() is not None


def test_release_unfreezes() -> None:
    settler = HeapSettler()
    settler.settle()
    assert gc.get_freeze_count() > 0
    settler.release()
    assert gc.get_freeze_count() == 0
