"""The demo's latency probes: a superseded probe is dropped, a seen one yields its latency."""

from __future__ import annotations

import time

from demo.live import Probe, settle_probes, supersede


def test_a_new_probe_of_the_same_product_replaces_the_pending_one() -> None:
    old, other = Probe(5, "5.10", 1.0), Probe(6, "6.20", 1.0)
    newer = Probe(5, "44.30", 2.0)
    assert supersede([old, other], newer) == [other, newer]


def test_settle_reports_only_probes_the_view_shows() -> None:
    now = time.time()
    probes = [Probe(1, "1.10", now - 2.0), Probe(2, "2.20", now - 1.0)]
    prices = {1: "1.10", 2: "0.99"}
    latencies = settle_probes(probes, prices.get)
    assert len(latencies) == 1 and 1900 < latencies[0] < 3000
    assert [p.product_id for p in probes] == [2]
