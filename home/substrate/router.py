"""The router: reads every active binding from the event log, resolves the device-less
speak rail, and delivers.

Each delivering binding is read through its durable consumer on the event log
(:mod:`home.substrate.route_consumers`), on the substrate's connection, and each event
is acked once routed: where routing stands is the consumer's position, which a
restarted home or an adopting member goes on from. Deliveries and resolved speaks go
out on the router's own connection, whose bus user may publish only those.
Decisions are made by :mod:`home.substrate.routing`; this module only moves
bytes between NATS and those functions, and counts what was dropped. A turn the
board says how well it heard is first offered to :mod:`home.substrate.rooms`, which
may hold it for a moment to answer one utterance on the board that heard it best.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from home.substrate import route_consumers
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
from shared.lifecycle import cancel_and_wait
from shared.messages.voice import TURN_EVENT_TYPE, Turn
from shared.subjects import DEVICELESS_SPEAK_PATTERN, device_of

log = logging.getLogger(__name__)

DEVICELESS_SPEAK = DEVICELESS_SPEAK_PATTERN

# Acks one binding event to its consumer.
Ack = Callable[[], Awaitable[None]]

# How long one fetch from a binding's consumer waits for an event (an event that
# arrives meanwhile is returned at once); and how soon a failed fetch is tried again.
FETCH_S = 5.0
RETRY_S = 0.5


class Router:
    """Delivers bindings for the active schemas: read from ``stream`` through ``log_nc``,
    published through ``nc``."""

    def __init__(
        self,
        nc: NatsClient,
        name: str,
        *,
        log_nc: NatsClient,
        stream: str,
        limits: EnvelopeLimits | None = None,
    ) -> None:
        self._nc = nc
        self._log_nc = log_nc
        self._stream = stream
        self.name = name
        self._limits = limits or EnvelopeLimits()
        self.counters = RouterCounters()
        self.rate = RateMeter()
        self.memory = BindingMemory()
        self.rooms: Rooms[_Routed] = Rooms()
        self._settling: set[asyncio.Task[None]] = set()
        self._readers: dict[str, list[_Reader]] = defaultdict(list)
        self._speak_sub: Subscription | None = None

    async def start(self) -> None:
        """Begin resolving device-less speaks."""
        self._speak_sub = await self._nc.subscribe(DEVICELESS_SPEAK, cb=self._on_speak)

    async def close(self) -> None:
        """Stop reading every binding (their consumers stay, with what was not routed);
        turns held for the right room are delivered first."""
        for schema in list(self._readers):
            await self.remove_routes(schema)
        while self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)
        if self._speak_sub is not None:
            await self._speak_sub.unsubscribe()
            self._speak_sub = None

    async def add_routes(self, schema: str, routes: Iterable[Route]) -> None:
        """Read ``schema``'s delivering routes from their consumers (kept from whoever
        routed the schema before, or made from now on); direct bindings need nothing.

        Each binding's reader makes or binds its consumer itself, again and again while
        JetStream cannot (a cluster electing leaders, a member catching up), and again
        when the consumer is found gone (the event log deleted): a consumer it makes
        delivers from the moment this call was made, or from the last moment it saw
        the one it had, so nothing published meanwhile is missed.
        """
        since = datetime.now(UTC)
        for route in routes:
            if route.deliver_to is None:
                continue
            durable = route_consumers.route_durable(route)
            task = asyncio.create_task(self._read(schema, route, since), name=f"route {durable}")
            self._readers[schema].append(_Reader(route, task))

    async def remove_routes(self, schema: str, *, forget: bool = False) -> None:
        """Stop reading ``schema``'s bindings; with ``forget`` (its user unapplied it),
        delete their consumers too, so a later apply starts from new events."""
        readers = self._readers.pop(schema, [])
        await cancel_and_wait(*(reader.task for reader in readers))
        if forget:
            for reader in readers:
                with contextlib.suppress(NatsError, TimeoutError):
                    await route_consumers.forget(self._log_nc, self._stream, reader.route)

    async def _read(self, schema: str, route: Route, since: datetime) -> None:
        """Route each event of ``route``'s consumer in order, and ack it once routed."""
        sub: JetStreamContext.PullSubscription | None = None
        try:
            while True:
                sub = sub or await self._bind(schema, route, since)
                if sub is None:
                    await asyncio.sleep(RETRY_S)
                    continue
                asked = datetime.now(UTC)
                try:
                    msgs = await sub.fetch(1, timeout=FETCH_S)
                except TimeoutError:
                    msgs = []
                    if not await self._still_there(route):
                        await _unsubscribe(sub)
                        sub = None
                        continue
                except NatsError as exc:
                    # The connection is down (it reconnects by itself), the log elects a
                    # leader, or the consumer is gone: bind (or make) it again shortly.
                    log.debug("router: fetch for %s failed: %r", route.from_, exc)
                    await _unsubscribe(sub)
                    sub = None
                    await asyncio.sleep(RETRY_S)
                    continue
                since = asked  # the consumer was there then: made again, it starts there
                for msg in msgs:
                    await self._take(route, msg)
        finally:
            if sub is not None:
                await _unsubscribe(sub)

    async def _bind(
        self, schema: str, route: Route, since: datetime
    ) -> JetStreamContext.PullSubscription | None:
        """``route``'s consumer, made from ``since`` if it is not there; None (and the
        error in ``home status``) while JetStream cannot say."""
        durable = route_consumers.route_durable(route)
        try:
            outcome = await route_consumers.prepare(self._log_nc, self._stream, route, since)
            sub = await self._log_nc.jetstream().pull_subscribe_bind(durable, stream=self._stream)
        except (NatsError, TimeoutError) as exc:
            self.counters.last_error["consumer"] = f"{durable} ({route.from_}): {exc!r}"
            log.warning("router: cannot read %s for %s yet: %r", route.from_, schema, exc)
            return None
        log.info("router: %s %s for %s (%s)", outcome, durable, schema, route.from_)
        return sub

    async def _still_there(self, route: Route) -> bool:
        """Whether ``route``'s consumer still exists (True when JetStream cannot say)."""
        durable = route_consumers.route_durable(route)
        try:
            await self._log_nc.jetstream().consumer_info(self._stream, durable)
        except NotFoundError:
            log.warning("router: %s is gone (event log deleted?); making it again", durable)
            return False
        except (NatsError, TimeoutError):
            pass
        return True

    async def _take(self, route: Route, msg: Msg) -> None:
        """Route one event of ``route``'s consumer; it is acked once routed."""
        if msg.metadata.num_delivered > 1:
            self.counters.redelivered += 1

        async def ack() -> None:
            with contextlib.suppress(NatsError):
                await msg.ack()

        await self._on_binding(route, msg.subject, msg.data, ack)

    def _parse(self, subject: str, data: bytes) -> Event | None:
        try:
            return Event.from_json(data, self._limits)
        except (EnvelopeTooLarge, NotTextOnly) as exc:
            self._drop(Dropped(REFUSED, f"on {subject}: {exc}"))
            return None
        except ContractError as exc:
            self._drop(Dropped(MALFORMED, f"on {subject}: {exc}"))
            return None

    async def _on_binding(
        self, route: Route, subject: str, data: bytes, ack: Ack | None = None
    ) -> None:
        """Route one binding event; ``ack`` it once it is delivered or dropped (a turn
        held for the right room is acked when its window settles)."""
        try:
            held = await self._route_binding(route, subject, data, ack)
        # The router's boundary: no event leaves it uncounted.
        except Exception as exc:  # noqa: BLE001
            self._drop(_unhandled(subject, exc))
            held = False
        if not held and ack is not None:
            await ack()

    async def _on_speak(self, msg: Msg) -> None:
        try:
            await self._resolve_speak(msg)
        # The router's boundary: no event leaves it uncounted.
        except Exception as exc:  # noqa: BLE001
            self._drop(_unhandled(msg.subject, exc))

    async def _route_binding(
        self, route: Route, subject: str, data: bytes, ack: Ack | None
    ) -> bool:
        """Deliver or drop one binding event now (False), or hold it for the right room
        (True: the window's settling delivers or drops it, and acks it)."""
        event = self._parse(subject, data)
        if event is None:
            return False
        decision = route_binding(event, route, self.name, utc_now())
        if isinstance(decision, Dropped):
            self._drop(decision)
            return False
        device = device_of(subject)
        routed = _Routed(route, decision, delivery_id(route, event), device, ack)
        heard = _heard(routed)
        if heard is not None:
            verdict = self.rooms.offer(route.schema, heard, time.monotonic())
            if isinstance(verdict, Late):
                self._drop_elsewhere(heard, verdict.group.best(), late=True)
                return False
            if not isinstance(verdict, Deliver):
                if verdict.opened:
                    self._hold(verdict.group)
                return True
        await self._deliver(routed)
        return False

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
            for turn in group.turns:
                if turn.item.ack is not None:
                    await turn.item.ack()

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
class _Reader:
    """One binding read from its consumer: the route and the task that reads it."""

    route: Route
    task: asyncio.Task[None]


async def _unsubscribe(sub: JetStreamContext.PullSubscription) -> None:
    """Let ``sub`` go (its consumer stays)."""
    with contextlib.suppress(NatsError):
        await sub.unsubscribe()


@dataclass(frozen=True)
class _Routed:
    """A binding ready to publish: its route, the stamped event, its log id, and how its
    event is acked to its consumer once routed."""

    route: Route
    decision: Delivered
    msg_id: str
    device: str | None
    ack: Ack | None = None


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
