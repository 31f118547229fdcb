"""The router: subscribes every active binding and the device-less speak rail, and delivers.

Decisions are made by :mod:`home.substrate.routing`; this module only moves
bytes between NATS and those functions, and counts what was dropped. A turn the
board says how well it heard is first offered to :mod:`home.substrate.rooms`, which
may hold it for a moment to answer one utterance on the board that heard it best.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError

from home.substrate.eventlog import read_log
from home.substrate.rooms import Deliver, Group, Heard, Late, Rooms, fold
from home.substrate.routing import (
    ELSEWHERE,
    FAILED,
    MALFORMED,
    REFUSED,
    BindingMemory,
    BindingOrigin,
    Delivered,
    Dropped,
    RateMeter,
    Route,
    RouterCounters,
    delivery_id,
    resolve_speak,
    route_binding,
)
from shared.errors import ContractError, EnvelopeTooLarge, NotTextOnly
from shared.event import EnvelopeLimits, Event, utc_now
from shared.messages.voice import TURN_EVENT_TYPE, Turn
from shared.nats_confirm import confirm_subscriptions
from shared.subjects import DEVICELESS_SPEAK_PATTERN, device_of

log = logging.getLogger(__name__)

DEVICELESS_SPEAK = DEVICELESS_SPEAK_PATTERN


class Router:
    """Delivers bindings for the active schemas over one NATS connection."""

    def __init__(self, nc: NatsClient, name: str, limits: EnvelopeLimits | None = None) -> None:
        self._nc = nc
        self.name = name
        self._limits = limits or EnvelopeLimits()
        self.counters = RouterCounters()
        self.rate = RateMeter()
        self.memory = BindingMemory()
        self.rooms: Rooms[_Routed] = Rooms()
        self._settling: set[asyncio.Task[None]] = set()
        self._subs: dict[str, list[Subscription]] = defaultdict(list)
        self._speak_sub: Subscription | None = None

    async def start(self) -> None:
        """Begin resolving device-less speaks."""
        self._speak_sub = await self._nc.subscribe(DEVICELESS_SPEAK, cb=self._on_speak)

    async def close(self) -> None:
        """Drop every subscription; turns held for the right room are delivered first."""
        while self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)
        for schema in list(self._subs):
            await self.remove_routes(schema)
        if self._speak_sub is not None:
            await self._speak_sub.unsubscribe()
            self._speak_sub = None

    async def add_routes(self, schema: str, routes: Iterable[Route]) -> None:
        """Subscribe ``schema``'s delivering routes (direct bindings need nothing)."""
        for route in routes:
            if route.deliver_to is None:
                continue

            async def deliver(msg: Msg, route: Route = route) -> None:
                await self._on_binding(route, msg.subject, msg.data)

            self._subs[schema].append(await self._nc.subscribe(route.from_, cb=deliver))
        await confirm_subscriptions(self._nc)

    async def replay(
        self, log_nc: NatsClient, stream: str, routes: Iterable[Route], since: float
    ) -> int:
        """Route again what ``stream`` recorded on ``routes``' subjects since ``since``
        (wall clock), read through ``log_nc`` (the router's own user may not read the
        log); how many events were read.

        For a lost member's schemas, once they are routed here: the sensations
        published while no router had them are in the event log but were never
        delivered. Deliveries the lost router did make carry the same
        ``Nats-Msg-Id`` (:func:`delivery_id`), so the log drops their second copy;
        expired ones are dropped and counted as routing drops them.
        """
        start = datetime.fromtimestamp(since, UTC)
        read = 0
        for route in routes:
            if route.deliver_to is None:
                continue
            async for logged in read_log(log_nc, stream, subject=route.from_, since=start):
                read += 1
                await self._on_binding(route, logged.subject, logged.raw.encode())
        self.counters.replayed += read
        return read

    async def remove_routes(self, schema: str) -> None:
        """Unsubscribe everything ``schema`` routed."""
        for sub in self._subs.pop(schema, []):
            await sub.unsubscribe()

    def _parse(self, subject: str, data: bytes) -> Event | None:
        try:
            return Event.from_json(data, self._limits)
        except (EnvelopeTooLarge, NotTextOnly) as exc:
            self._drop(Dropped(REFUSED, f"on {subject}: {exc}"))
            return None
        except ContractError as exc:
            self._drop(Dropped(MALFORMED, f"on {subject}: {exc}"))
            return None

    async def _on_binding(self, route: Route, subject: str, data: bytes) -> None:
        try:
            await self._route_binding(route, subject, data)
        # The router's boundary: no event leaves it uncounted.
        except Exception as exc:  # noqa: BLE001
            self._drop(_unhandled(subject, exc))

    async def _on_speak(self, msg: Msg) -> None:
        try:
            await self._resolve_speak(msg)
        # The router's boundary: no event leaves it uncounted.
        except Exception as exc:  # noqa: BLE001
            self._drop(_unhandled(msg.subject, exc))

    async def _route_binding(self, route: Route, subject: str, data: bytes) -> None:
        event = self._parse(subject, data)
        if event is None:
            return
        decision = route_binding(event, route, self.name, utc_now())
        if isinstance(decision, Dropped):
            self._drop(decision)
            return
        device = device_of(subject)
        routed = _Routed(route, decision, delivery_id(route, event), device)
        heard = _heard(routed)
        if heard is not None:
            verdict = self.rooms.offer(route.schema, heard, time.monotonic())
            if isinstance(verdict, Late):
                self._drop_elsewhere(heard, verdict.group.best(), late=True)
                return
            if not isinstance(verdict, Deliver):
                if verdict.opened:
                    self._hold(verdict.group)
                return
        await self._deliver(routed)

    async def _deliver(self, routed: _Routed) -> None:
        decision, device = routed.decision, routed.device
        if device is not None and decision.event.binding_id is not None:
            origin = BindingOrigin(device, routed.route.schema)
            self.memory.remember(decision.event.binding_id, origin)
        if await self._publish(decision, routed.msg_id):
            self.counters.count_routed(routed.route.schema)

    def _hold(self, group: Group[_Routed]) -> None:
        async def settle() -> None:
            await asyncio.sleep(max(0.0, group.closes_at - time.monotonic()))
            best, others = self.rooms.settle(group)
            for other in others:
                self._drop_elsewhere(other, best, late=False)
            try:
                await self._deliver(best.item)
            # The router's boundary: no event leaves it uncounted.
            except Exception as exc:  # noqa: BLE001
                self._drop(_unhandled(best.item.route.from_, exc))

        task = asyncio.create_task(settle(), name="rooms-settle")
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    def _drop_elsewhere(
        self, turn: Heard[_Routed], answered: Heard[_Routed], *, late: bool
    ) -> None:
        when = "after its window" if late else "in the same window"
        self._drop(
            Dropped(
                ELSEWHERE,
                f"turn {turn.item.decision.event.binding_id} of {turn.device} ({turn.words!r}, "
                f"heard {_score(turn)}) is answered on {answered.device} (heard "
                f"{_score(answered)}), which heard it {when}",
            )
        )

    async def _resolve_speak(self, msg: Msg) -> None:
        event = self._parse(msg.subject, msg.data)
        if event is None:
            return
        decision = resolve_speak(event, msg.subject, self.memory, self.name, utc_now())
        if isinstance(decision, Dropped):
            self._drop(decision)
            return
        if await self._publish(decision):
            self.counters.resolved_speak += 1

    async def _publish(self, delivered: Delivered, msg_id: str | None = None) -> bool:
        headers = None if msg_id is None else {"Nats-Msg-Id": msg_id}
        try:
            await self._nc.publish(delivered.subject, delivered.event.to_json(), headers=headers)
        except NatsError as exc:
            self.counters.last_error["publish"] = f"on {delivered.subject}: {exc!r}"
            log.error("router could not publish on %s: %r", delivered.subject, exc)
            return False
        self.rate.mark(time.monotonic())
        return True

    def _drop(self, dropped: Dropped) -> None:
        self.counters.drop(dropped)
        log.warning("router dropped an event (%s): %s", dropped.reason, dropped.detail)


@dataclass(frozen=True)
class _Routed:
    """A binding ready to publish: its route, the stamped event, and its log id."""

    route: Route
    decision: Delivered
    msg_id: str
    device: str | None


def _heard(routed: _Routed) -> Heard[_Routed] | None:
    """The turn as the right room sees it, when a board said how well it heard it."""
    event = routed.decision.event
    if event.event_type != TURN_EVENT_TYPE or routed.device is None:
        return None
    try:
        turn = Turn.from_event(event)
    except ContractError:
        return None  # the agent refuses it, naming the field; nothing to arbitrate
    if turn.heard is None:
        return None
    return Heard(routed.device, fold(turn.text), turn.heard.score, routed)


def _score(turn: Heard[_Routed]) -> str:
    wake, level = turn.score
    return f"wake {wake:.2f}, level {level:.1f} dB"


def _unhandled(subject: str, exc: Exception) -> Dropped:
    """What an exception that escaped the routing of one message is counted as."""
    reason = MALFORMED if isinstance(exc, ContractError) else FAILED
    return Dropped(reason, f"on {subject}: {exc!r}")
