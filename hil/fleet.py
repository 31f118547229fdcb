"""Many boards on one home: N simulated boards paired with a running ``home up``, speaking turns.

Each board is the real edge half of a bridge: paired through home's ``bridge.pair``
verb (``edge/pair_through_home.py``), an :class:`~bridge.node.edge.EdgeBridgeNode`
over its own SSH connection to home's endpoint, and an
:class:`~edge.tui.session.EdgeSession` typing turns on its device's rails and acking
each speak as a speaker would. The boards share one loopback nats-server on this
side (a board's own would add N servers and nothing home sees): each bridge
exports and imports only its own device's rails, so nothing crosses between them.

:class:`Fleet` measures what home does with them: turns answered, time from a turn
to its answer, turns lost (no answer within the timeout) or answered more than
once, and home's RSS, CPU and open file descriptors over its process tree
(psutil) while the turns run.
The load is paced: every board speaks once per ``interval_s`` at a random phase,
as people in separate rooms do, so the offered rate grows with N.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bridge.node.edge import EdgeBridgeNode
from edge.natsd import LocalNatsServer
from edge.pair_through_home import pair_through_home
from edge.tui.session import EdgeSession, SessionObserver
from edge.tui.wire import AgentReply, Incoming
from edge.wire import SpeakRequest
from hil.runner import HilError
from hil.wait import percentile
from shared.errors import TetherError
from shared.home_state import HomeState, HomeStateError
from shared.lifecycle import Service
from shared.schema import load_bridge_half

# Pairing makes keys and reloads home's bus users: a few at a time keeps home responsive.
PAIR_CONCURRENCY = 4
# Boards log in a few at a time, as boards booting across a building do: the endpoint
# closes a ninth unauthenticated connection from one address (bridge/transport/server.py),
# and every board here comes from 127.0.0.1.
LOGIN_WAVE = 4
LINK_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class FleetLoad:
    """How the boards speak: ``turns`` each, one per ``interval_s`` at a random phase.

    With ``warmup``, every board first speaks one turn (also at a random phase within
    ``interval_s``) and all are answered before the measured turns start: a board's
    first turn to an agent also starts its conversation there (docs/architecture.md
    "Sessions"), which costs more than a turn and is reported apart.
    """

    turns: int = 3
    interval_s: float = 10.0
    turn_timeout_s: float = 60.0
    seed: int = 21
    warmup: bool = True


@dataclass
class FleetReport:
    """What one run of the fleet measured."""

    boards: int
    sent: int
    answered: int
    lost: int
    duplicated: int
    latencies_ms: list[float]
    # The same, of the warm-up turns (each board's first of the run).
    first_latencies_ms: list[float]
    wall_s: float
    pair_s: float
    link_s: float
    home_rss_mb: float
    home_cpu_s: float
    home_fds: int

    @property
    def turns_per_s(self) -> float:
        """Answered turns per second of the run."""
        return self.answered / self.wall_s if self.wall_s > 0 else 0.0

    def quantile_ms(self, q: float, *, first: bool = False) -> float:
        """The ``q`` quantile (0..1) of the measured turns' latencies by nearest rank (NaN
        when none); with ``first``, of the warm-up turns'."""
        values = self.first_latencies_ms if first else self.latencies_ms
        return percentile(values, q * 100) if values else float("nan")


@dataclass
class _Answers(SessionObserver):
    """One board's answers by binding_id, and when the first of each came."""

    first_at: dict[str, float] = field(default_factory=dict)
    count: Counter[str] = field(default_factory=Counter)
    seen_events: set[str] = field(default_factory=set)
    redelivered: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_incoming(self, item: Incoming) -> None:
        if not isinstance(item, SpeakRequest | AgentReply) or item.binding_id is None:
            return
        if item.event_id in self.seen_events:
            self.redelivered += 1
            return
        self.seen_events.add(item.event_id)
        # A speak is the answer; a reply after it for the same turn is its closing prose.
        if isinstance(item, AgentReply) and item.binding_id in self.count:
            return
        self.first_at.setdefault(item.binding_id, time.monotonic())
        # An answer spoken in parts (``more`` on all but the last) is one answer: heard
        # at its first part, counted at its last.
        if isinstance(item, SpeakRequest) and item.more:
            return
        self.count[item.binding_id] += 1
        self.arrived.set()


@dataclass
class _Board:
    device: str
    bridge: EdgeBridgeNode
    session: EdgeSession
    answers: _Answers
    sent: dict[str, float] = field(default_factory=dict)
    warmup: set[str] = field(default_factory=set)


class Fleet(Service):
    """``boards`` boards paired with the home running from ``data_dir``; use ``async with``.

    Device names are ``<prefix>-<i>``; pairing them again on a later run reuses the
    pairing home already holds.
    """

    def __init__(self, data_dir: Path, boards: int, *, prefix: str = "fleet") -> None:
        if boards < 1:
            raise HilError(f"a fleet needs at least one board, not {boards}")
        self.data_dir = data_dir
        self.devices = [f"{prefix}-{i:03d}" for i in range(boards)]
        self.pair_s = 0.0
        self.link_s = 0.0
        self._server = LocalNatsServer()
        self._boards: list[_Board] = []

    async def start(self) -> None:
        """Start the fleet's NATS and its boards; what started is closed again on failure."""
        await self.close_on_failure(self._start())

    async def close(self) -> None:
        """Stop every board's session and bridge, then the shared nats-server."""
        for board in self._boards:
            with contextlib.suppress(Exception):
                await board.session.close()
            with contextlib.suppress(Exception):
                await board.bridge.close()
        self._boards.clear()
        await self._server.close()

    async def _start(self) -> None:
        began = time.monotonic()
        gate = asyncio.Semaphore(PAIR_CONCURRENCY)

        async def pair(device: str) -> tuple[str, Path, Path]:
            async with gate:
                try:
                    pairing = await pair_through_home(self.data_dir, device)
                except TetherError as exc:
                    raise HilError(f"pairing {device} with home failed: {exc}") from exc
                return device, pairing.edge_half, pairing.client_key

        pairings = await asyncio.gather(*(pair(d) for d in self.devices))
        self.pair_s = time.monotonic() - began
        await self._server.start()
        began = time.monotonic()
        for device, half, key in pairings:
            await self._wait_links(at_most_down=LOGIN_WAVE - 1)
            bridge = EdgeBridgeNode(
                load_bridge_half(half), client_key=key, nats_url=self._server.url
            )
            await bridge.start()
            session = EdgeSession(self._server.url, device, rtt_interval_s=60.0)
            await session.__aenter__()
            answers = _Answers()
            await session.listen(answers)
            self._boards.append(_Board(device, bridge, session, answers))
        await self._wait_links(at_most_down=0)
        self.link_s = time.monotonic() - began

    async def _wait_links(self, *, at_most_down: int) -> None:
        deadline = time.monotonic() + LINK_TIMEOUT_S
        while True:
            down = [b.device for b in self._boards if b.bridge.health().get("state") != "up"]
            if len(down) <= at_most_down:
                return
            if time.monotonic() > deadline:
                raise HilError(
                    f"{len(down)} of {len(self._boards)} boards had no link home after "
                    f"{LINK_TIMEOUT_S:g} s (first: {', '.join(down[:5])})"
                )
            await asyncio.sleep(0.02)

    async def run(self, load: FleetLoad) -> FleetReport:
        """Every board speaks ``load.turns`` turns; wait for the answers; what was measured."""
        rng = random.Random(load.seed)
        home = _home_tree(self.data_dir)
        cpu_before = _cpu_s(home)
        began = time.monotonic()
        if load.warmup:
            await asyncio.gather(
                *(self._speak(b, 1, load, rng.uniform(0, load.interval_s)) for b in self._boards)
            )
            await self._await_answers(load.turn_timeout_s)
            for board in self._boards:
                board.warmup.update(board.sent)
        await asyncio.gather(
            *(
                self._speak(b, load.turns, load, rng.uniform(0, load.interval_s))
                for b in self._boards
            )
        )
        await self._await_answers(load.turn_timeout_s)
        wall = time.monotonic() - began
        cpu = _cpu_s(home) - cpu_before
        rss = sum(_rss(p) for p in home) / 2**20
        fds = sum(_fds(p) for p in home)
        latencies: list[float] = []
        first: list[float] = []
        sent = answered = duplicated = 0
        for board in self._boards:
            for bid, at in board.sent.items():
                sent += 1
                copies = board.answers.count.get(bid, 0)
                if copies:
                    answered += 1
                    took = (board.answers.first_at[bid] - at) * 1000
                    (first if bid in board.warmup else latencies).append(took)
                duplicated += max(0, copies - 1)
            duplicated += board.answers.redelivered
        return FleetReport(
            boards=len(self._boards),
            sent=sent,
            answered=answered,
            lost=sent - answered,
            duplicated=duplicated,
            latencies_ms=latencies,
            first_latencies_ms=first,
            wall_s=wall,
            pair_s=self.pair_s,
            link_s=self.link_s,
            home_rss_mb=rss,
            home_cpu_s=cpu,
            home_fds=fds,
        )

    @staticmethod
    async def _speak(board: _Board, turns: int, load: FleetLoad, phase_s: float) -> None:
        await asyncio.sleep(phase_s)
        for i in range(turns):
            started = time.monotonic()
            turn = await board.session.send_turn(f"turn {len(board.sent)} from {board.device}")
            board.sent[turn.binding_id] = started
            if i + 1 < turns:
                await asyncio.sleep(max(0.0, load.interval_s - (time.monotonic() - started)))

    async def _await_answers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for board in self._boards:
            while any(bid not in board.answers.first_at for bid in board.sent):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                board.answers.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(board.answers.arrived.wait(), min(remaining, 1.0))
        # A duplicate, if any, comes right behind the original.
        await asyncio.sleep(1.0)


def _home_tree(data_dir: Path) -> list[psutil.Process]:
    """The ``home up`` process of ``data_dir`` (from its ``home.json``) and its children."""
    try:
        root = psutil.Process(HomeState.load(data_dir).pid)
        return [root, *root.children(recursive=True)]
    except (HomeStateError, psutil.Error) as exc:
        raise HilError(f"no running home in {data_dir}: {exc}") from exc


def _cpu_s(processes: list[psutil.Process]) -> float:
    total = 0.0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def _rss(proc: psutil.Process) -> int:
    try:
        return int(proc.memory_info().rss)
    except psutil.Error:
        return 0


def _fds(proc: psutil.Process) -> int:
    try:
        return int(proc.num_fds())
    except psutil.Error:
        return 0
