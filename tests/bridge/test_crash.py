"""kill -9 of the edge half, then of the home half, mid-stream: every event arrives once.

The scenario is :mod:`tests.bridge.crash` (real processes, real SSH, real nats-servers),
its board publishing as the shipped edge producers do: each event asked of the edge half
until it is taken (edge/handover.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bridge.crash import run_crash
from tests.bridge.servers import Paired


@pytest.mark.slow
async def test_durable_outbox_delivers_exactly_once_across_kill_9_of_each_half(
    paired: Paired, tmp_path: Path
) -> None:
    report = await run_crash(paired, tmp_path, events=3000, rate=500)

    assert set(report.arrivals) <= set(report.published)
    assert report.duplicates == [], f"{len(report.duplicates)} events delivered twice"
    assert report.taken_at_kill, "the edge was killed with no event in flight: not a crash test"
    assert report.lost_edge_kill == [], (
        f"{len(report.lost_edge_kill)} of {len(report.taken_at_kill)} events in the killed "
        "edge's outbox never arrived"
    )
    assert report.lost_home_kill == [], (
        f"{len(report.lost_home_kill)} events published around the home kill never arrived"
    )
    # Events still in the killed edge's socket were never taken from its bus (core NATS
    # acknowledges no one), but the board's producers ask (edge/handover.py) until taken.
    assert report.lost_at_intake == [], (
        f"{len(report.lost_at_intake)} events published before the edge kill were never taken"
    )
    missing = set(report.published) - set(report.arrivals)
    assert not missing, f"{len(missing)} of {len(report.published)} events never arrived"
