"""What every HIL target provides: a board to talk to and a home to watch it from.

A target is an async context manager. While open, the suites use only this
interface, so the same cases run against a virtual board on this machine, a
real board over SSH, or an image booted under emulation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg

from hil.wake import CARRIERS
from shared.errors import ContractError
from shared.event import Event
from shared.lifecycle import Service
from shared.messages.bridge import BridgeStatus
from shared.nats_confirm import confirm_subscriptions
from shared.subjects import EVENTS_PATTERN, bridge_status_subject, edge_notice_subject


class BoardSignals:
    """What a target reads off a board's own NATS: the local notices it played and its
    bridge's view of the link (None until the bridge has said)."""

    def __init__(self) -> None:
        self.notices = 0
        self.link_up: bool | None = None

    async def watch(self, nc: Client, device: str) -> None:
        """Count ``device``'s notices and follow its bridge status on ``nc``."""

        async def on_notice(msg: Msg) -> None:
            self.notices += 1

        async def on_status(msg: Msg) -> None:
            try:
                self.link_up = BridgeStatus.from_event(Event.from_json(msg.data)).reachable
            except ContractError:
                return

        await nc.subscribe(edge_notice_subject(device), cb=on_notice)
        await nc.subscribe(bridge_status_subject(device), cb=on_status)
        await confirm_subscriptions(nc)


async def close_watch(nc: Client | None) -> None:
    """Close a board's NATS connection that a target watches; the board may be gone
    already, and a target's close must still end the rest."""
    if nc is not None:
        with contextlib.suppress(Exception):
            await nc.close()


@dataclass(frozen=True)
class Headroom:
    """Free disk and memory on the board."""

    disk_free_mb: float
    mem_available_mb: float


@dataclass(frozen=True)
class ResourceSample:
    """One sample of the board's edge process and the board itself."""

    rss_mb: float
    cpu_percent: float
    temperature_c: float | None = None


class Board(Protocol):
    """The board side of a target, as the suites see it."""

    device: str
    phrases: tuple[str, ...]
    # True when the board's recognizer is limited to the phrase grammar, so a turn's text
    # must be the phrase exactly; False for free recognition (any text counts as the turn).
    exact_text: bool

    async def reachable(self) -> str | None:
        """None when hil can talk to the board; else why not (e.g. a host key mismatch)."""

    async def services(self) -> dict[str, str]:
        """Each board service and its state (``active`` when running)."""

    async def restarts(self) -> int | None:
        """How often the board's service manager restarted the edge (None: cannot tell)."""

    async def versions(self) -> dict[str, str]:
        """``board`` and ``home`` versions of tether, to compare."""

    async def half_digests(self) -> tuple[str, str]:
        """The digest of the edge half the board carries and of home's half for this device."""

    async def clock(self) -> datetime:
        """The board's clock."""

    async def headroom(self) -> Headroom:
        """Free disk and memory on the board."""

    async def inject(self, phrase: str) -> float:
        """Make the board hear ``phrase``; return the monotonic time the audio ended."""

    async def playbacks(self) -> int | None:
        """How many utterances the board has played so far (None: cannot tell)."""

    async def wait_link(self, up: bool, within_s: float) -> bool:
        """Wait until the board's link to home is up (or down); False if it never was."""

    async def notices(self) -> int:
        """How many local 'home unreachable' notices the board has spoken."""

    async def cut_link(self) -> None:
        """Cut the link between board and home (home stays up)."""

    async def restore_link(self) -> None:
        """Let the link come back."""

    async def sample(self) -> ResourceSample:
        """The edge process's memory and CPU now."""

    async def logs(self) -> str:
        """Recent logs of the board and home, for failing cases."""


@dataclass
class Seen:
    """One event seen on home's NATS and when (monotonic)."""

    at: float
    subject: str
    event: Event


@dataclass
class HomeWatch(Service):
    """Everything published under ``events.>`` on home's NATS, with arrival times."""

    url: str
    seen: list[Seen] = field(default_factory=list)
    malformed: int = 0
    _nc: Client | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Connect and record every event on the home's bus from now on."""
        self._nc = await nats.connect(self.url, name="hil-watch")

        async def on_message(msg: Msg) -> None:
            try:
                event = Event.from_json(msg.data)
            except ContractError:
                self.malformed += 1
                return
            self.seen.append(Seen(time.monotonic(), msg.subject, event))
            self._changed.set()

        await self._nc.subscribe(EVENTS_PATTERN, cb=on_message)
        await confirm_subscriptions(self._nc)

    async def close(self) -> None:
        """Close the connection."""
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.close()
            self._nc = None

    def matching(
        self, prefix: str, binding_id: str | None = None, since: float = 0.0
    ) -> list[Seen]:
        """Events on subjects starting with ``prefix`` (with ``binding_id``) after ``since``."""
        return [
            s
            for s in self.seen
            if s.subject.startswith(prefix)
            and s.at >= since
            and (binding_id is None or s.event.binding_id == binding_id)
        ]

    async def wait(
        self, prefix: str, *, binding_id: str | None = None, since: float = 0.0, within_s: float
    ) -> Seen | None:
        """The first matching event, waiting up to ``within_s`` seconds; None if none came."""
        deadline = time.monotonic() + within_s
        while True:
            found = self.matching(prefix, binding_id, since)
            if found:
                return found[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))


@dataclass
class TargetContext:
    """What the suites get: the board, a watch on home, and the run's knobs."""

    board: Board
    home: HomeWatch
    work_dir: Path
    turn_timeout_s: float = 60.0
    linkdrop_s: float = 5.0
    soak_turns: int = 5
    soak_minutes: float = 1.0
    # The fleet suite: the running home's --data-dir, and how many boards in each case.
    home_dir: Path | None = None
    fleet_sizes: tuple[int, ...] = (10,)
    fleet_turns: int = 3
    fleet_interval_s: float = 5.0
    # The wake suite: hours of background audio per half, and the board's wake word model.
    wake_hours: float = 1.0
    wake_model: str = "okay_nabu"
    wake_carriers: tuple[str, ...] = CARRIERS  # the sentences each wake word opens
