"""kill -9 of each bridge half mid-stream, as real processes: the chaos test's and bench's scenario.

Home runs with JetStream and a stream on ``events.>`` (its event log under
``home up``); the board's nats-server is plain, as on a battery board. Both halves
keep a durable outbox. Events flow board -> home at a steady rate; the edge half is
killed with events in flight (no new event is made while it is down; those in
flight are asked again), restarted, then the home half is killed
while the board keeps publishing, and restarted.

The board publishes as every shipped edge producer does, through
:func:`edge.handover.hand_to_bridge`: each event is asked of the edge half and asked
again until the half answers that it is in its outbox, for as long as the event lives.
What the edge had taken at the kill is known from its outbox file; the events still in
its socket then are asked again and must arrive too. So every event arrives, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig

from bridge.node.outbox import store_path
from edge.handover import hand_to_bridge
from shared.event import Event
from shared.messages.bridge import LINK_UP, BridgeStatus
from shared.proc import free_port, terminate_blocking, wait_for_port
from shared.subjects import bridge_status_subject
from tests.bridge.servers import Paired, nats_server

UP = "events.sensation.board.turn"
TTL_MS = 120_000


@dataclass
class CrashReport:
    """What a run published and what arrived, by event id and in publish order."""

    published: list[str] = field(default_factory=list)
    before_edge_kill: int = 0  # how many were published when the edge half was killed
    taken_at_kill: set[str] = field(default_factory=set)  # in the edge's outbox file then
    arrivals: Counter[str] = field(default_factory=Counter)

    @property
    def duplicates(self) -> list[str]:
        """Events delivered more than once."""
        return [e for e, n in self.arrivals.items() if n > 1]

    @property
    def lost_at_intake(self) -> list[str]:
        """Published before the edge kill, never taken by the edge half, so never delivered."""
        return [e for e in self.published[: self.before_edge_kill] if e not in self.arrivals]

    @property
    def lost_edge_kill(self) -> list[str]:
        """Taken by the edge (in its outbox file at the kill) and never delivered."""
        return [e for e in self.taken_at_kill if e not in self.arrivals]

    @property
    def lost_home_kill(self) -> list[str]:
        """Published while the edge half was running after its restart, never delivered."""
        return [e for e in self.published[self.before_edge_kill :] if e not in self.arrivals]


class Sides:
    """The two halves as processes, restartable, killed with SIGKILL on demand."""

    def __init__(
        self, paired: Paired, outbox: Path | None, home_url: str, edge_url: str, sync: str
    ):
        self.paired, self.outbox, self.sync = paired, outbox, sync
        self.home_url, self.edge_url = home_url, edge_url
        self.port = free_port()
        self.home: subprocess.Popen[bytes] | None = None
        self.edge: subprocess.Popen[bytes] | None = None

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        verbose = bool(os.environ.get("BENCH_VERBOSE"))
        return subprocess.Popen(
            [sys.executable, "-m", "tests.bridge.sides", *args, str(self.outbox or ""), self.sync],
            stdout=subprocess.DEVNULL,
            stderr=None if verbose else subprocess.DEVNULL,
        )

    async def start_home(self) -> None:
        """Start the home half and wait for its SSH port."""
        r = self.paired.result
        self.home = self._spawn(
            "home", str(r.home_half), str(r.host_key), self.home_url, str(self.port)
        )
        await wait_for_port("127.0.0.1", self.port, timeout_s=20, exit_code=self.home.poll)

    def start_edge(self) -> None:
        """Start the edge half (it connects on its own)."""
        r = self.paired.result
        self.edge = self._spawn(
            "edge", str(r.edge_half), str(r.client_key), self.edge_url, str(self.port)
        )

    @staticmethod
    def kill(proc: subprocess.Popen[bytes] | None) -> None:
        """SIGKILL, and reap."""
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        """Terminate whatever still runs."""
        for proc in (self.edge, self.home):
            if proc is not None:
                terminate_blocking(proc, 10)


def taken(outbox: Path | None, paired: Paired) -> set[str]:
    """Event ids in the edge's outbox file (read after its process died); none in memory."""
    if outbox is None:
        return set()
    db = sqlite3.connect(store_path(outbox, paired.edge))
    try:
        return {row[0] for row in db.execute("SELECT event_id FROM outbox")}
    finally:
        db.close()


@contextlib.contextmanager
def home_with_event_log(tmp: Path) -> Iterator[str]:
    """Home's nats-server with JetStream, as under ``home up``."""
    tmp.mkdir(parents=True, exist_ok=True)
    conf = tmp / "home-nats.conf"
    conf.write_text(f'jetstream {{ store_dir: "{tmp / "js"}" }}\n')
    with nats_server(conf) as url:
        yield url


async def _event_log(nc: NATS) -> None:
    await nc.jetstream().add_stream(
        StreamConfig(name="EVENTS", subjects=["events.>"], storage=StorageType.FILE)
    )


class _LinkWatch:
    """Notes each ``up`` status the edge half publishes on the board's bus."""

    def __init__(self) -> None:
        self.ups = 0

    async def cb(self, msg: Msg) -> None:
        if BridgeStatus.from_event(Event.from_json(msg.data)).link_state == LINK_UP:
            self.ups += 1


async def _until(predicate: object, what: str, timeout_s: float) -> None:
    assert callable(predicate)
    try:
        async with asyncio.timeout(timeout_s):
            while not predicate():
                await asyncio.sleep(0.001)
    except TimeoutError:
        raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}") from None


async def run_crash(
    paired: Paired,
    tmp: Path,
    *,
    events: int = 3000,
    rate: int = 500,
    sync: str = "NORMAL",
    durable: bool = True,
) -> CrashReport:
    """The scenario: ``events`` at ``rate``/s, edge killed at 30 %, home killed at 60 %.

    ``durable=False`` runs both halves with their outbox in memory, for comparison.
    """
    report = CrashReport()
    outbox = tmp / "outbox" if durable else None
    with nats_server() as edge_url, home_with_event_log(tmp) as home_url:
        home_nc, edge_nc = await nats.connect(home_url), await nats.connect(edge_url)
        sides = Sides(paired, outbox, home_url, edge_url, sync)
        try:
            await _event_log(home_nc)

            async def arrived(msg: Msg) -> None:
                report.arrivals[Event.from_json(msg.data).event_id] += 1

            await home_nc.subscribe(UP, cb=arrived)
            watch = _LinkWatch()
            await edge_nc.subscribe(bridge_status_subject(paired.edge.bridge), cb=watch.cb)
            await sides.start_home()
            sides.start_edge()
            await _until(lambda: watch.ups >= 1, "the link up", 30)
            await _publish(report, sides, edge_nc, watch, events, rate)
            # Every event was taken by the edge half (asked until it was), so all are due.
            with contextlib.suppress(TimeoutError):  # the report says what is missing
                await _until(
                    lambda: len(report.arrivals) >= len(report.published), "every event", 60
                )
            await asyncio.sleep(1.0)  # a duplicate would show up by now
        finally:
            sides.stop()
            await home_nc.close()
            await edge_nc.close()
    return report


BURST = 50


async def _publish(
    report: CrashReport,
    sides: Sides,
    nc: NATS,
    watch: _LinkWatch,
    events: int,
    rate: int,
) -> None:
    """Bursts of :data:`BURST` at ``rate``; each kill lands mid-burst, with events in flight.

    Every event is handed over as the board's producers do, and the asks run on while
    the edge is down (each asking again until taken).
    """
    edge_kill = events * 3 // 10 // BURST * BURST + BURST // 2
    home_kill = events * 6 // 10 // BURST * BURST + BURST // 2
    restarts: list[asyncio.Task[None]] = []
    asks: list[asyncio.Task[None]] = []
    for i in range(events):
        if i == edge_kill:
            await _edge_has_taken(report, sides)
            sides.kill(sides.edge)
            report.before_edge_kill = len(report.published)
            report.taken_at_kill = taken(sides.outbox, sides.paired)
            ups = watch.ups
            sides.start_edge()
            await _until(lambda ups=ups: watch.ups > ups, "the edge half back", 30)
        if i == home_kill:
            # Kill as soon as home delivered the burst so far: before it committed and acked
            # it (acks trail delivery by a few ms), so the edge resends what home delivered.
            last = report.published[-1]
            await _until(lambda last=last: last in report.arrivals, "home delivering", 10)
            sides.kill(sides.home)
            restarts.append(asyncio.create_task(_restart_home(sides)))
        event = Event.new(
            "sensation.turn",
            {"text": f"turn number {i}: the quick brown fox"},
            source="crash",
            sequence_number=i,
            ttl_ms=TTL_MS,
        )
        report.published.append(event.event_id)
        asks.append(asyncio.create_task(hand_to_bridge(nc, UP, event)))
        if i % BURST == BURST - 1:
            await asyncio.sleep(BURST / rate)
    await nc.flush()
    await asyncio.gather(*restarts, *asks)


async def _edge_has_taken(report: CrashReport, sides: Sides) -> None:
    """Until the edge took part of the burst: in its outbox file, or (in memory) delivered."""
    if sides.outbox is not None:
        # Killed while it takes the burst: some events in its outbox, most not yet sent.
        await _until(lambda: taken(sides.outbox, sides.paired), "events in the outbox", 10)
        return
    # Nothing to look into: as soon as home delivered the first of the burst.
    first = report.published[-(BURST // 2)]
    await _until(lambda: first in report.arrivals, "home delivering", 10)


async def _restart_home(sides: Sides) -> None:
    await asyncio.sleep(0.5)  # the board keeps publishing into its outbox meanwhile
    await sides.start_home()
