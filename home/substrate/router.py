"""The router: subscribes every active binding and the device-less speak rail, and delivers.

Decisions are made by :mod:`home.substrate.routing`; this module only moves
bytes between NATS and those functions, and counts what was dropped.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError

from home.substrate.eventlog import read_log
from home.substrate.routing import (
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
        self._subs: dict[str, list[Subscription]] = defaultdict(list)
        self._speak_sub: Subscription | None = None

    async def start(self) -> None:
        """Begin resolving device-less speaks."""
        self._speak_sub = await self._nc.subscribe(DEVICELESS_SPEAK, cb=self._on_speak)

    async def close(self) -> None:
        """Drop every subscription."""
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
        if device is not None and decision.event.binding_id is not None:
            self.memory.remember(decision.event.binding_id, BindingOrigin(device, route.schema))
        if await self._publish(decision, delivery_id(route, event)):
            self.counters.count_routed(route.schema)

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


def _unhandled(subject: str, exc: Exception) -> Dropped:
    """What an exception that escaped the routing of one message is counted as."""
    reason = MALFORMED if isinstance(exc, ContractError) else FAILED
    return Dropped(reason, f"on {subject}: {exc!r}")
