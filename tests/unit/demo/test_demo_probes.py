"""The demo's latency probes: a superseded probe is dropped, each view's sighting yields a latency."""

from __future__ import annotations

import time

from demo.live import Probe, settle_probes, supersede


def test_a_new_probe_of_the_same_product_replaces_the_pending_one() -> None:
    old, other = Probe(5, "Mug #1", 1.0), Probe(6, "Bowl #2", 1.0)
    newer = Probe(5, "Mug #3", 2.0)
    assert supersede([old, other], newer) == [other, newer]


def test_each_view_settles_on_its_own_and_a_probe_leaves_once_every_view_showed_it() -> None:
    now = time.time()
    probes = [Probe(1, "Mug #1", now - 2.0), Probe(2, "Bowl #2", now - 1.0)]
    cache = {1: "Mug #1", 2: "Bowl #2"}
    search = {1: "Mug #1", 2: "Bowl"}  # product 2: the index still has the older name
    seen = settle_probes(probes, {"cache": lambda ids: cache, "search": lambda ids: search})
    assert sorted(view for view, _ms in seen) == ["cache", "cache", "search"]
    assert all(900 < ms < 3000 for _view, ms in seen)
    assert [(p.product_id, p.unseen) for p in probes] == [(1, {"warehouse"}), (2, {"search", "warehouse"})]
    seen = settle_probes(probes, {"warehouse": lambda ids: {1: "Mug #1"}, "search": lambda ids: {}})
    assert [view for view, _ms in seen] == ["warehouse"]
    assert [p.product_id for p in probes] == [2]
