"""Routing decisions, as pure functions: no sockets, no clock of their own.

The router (:mod:`home.substrate.router`) feeds each event it receives through
:func:`route_binding` (an active binding's ``from``) or :func:`resolve_speak`
(a device-less speak) and publishes what comes back as :class:`Delivered`, or
counts what comes back as :class:`Dropped`.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime

from shared.event import Event, new_binding_id
from shared.schema import NodeSpec
from shared.subjects import parse_subject, speak_subject, split_subject, workspace_in_subject

# Why the router did not deliver an event; each is counted in `home status`.
EXPIRED, LOOPED, MALFORMED, REFUSED, UNRESOLVED, FAILED = (
    "expired",
    "looped",
    "malformed",
    "refused",
    "unresolved",
    "failed",
)
# heard_elsewhere: another board heard the same utterance better (home/substrate/rooms.py).
ELSEWHERE = "heard_elsewhere"
# refused: a well-formed event over the size limit or not text-only.
# failed: the router raised handling it (a bug of ours): counted, never silent.
DROP_REASONS = (EXPIRED, LOOPED, MALFORMED, REFUSED, UNRESOLVED, FAILED, ELSEWHERE)


@dataclass(frozen=True)
class Route:
    """One active binding: events on ``from_`` go to ``node`` on ``deliver_to``.

    ``deliver_to`` is None for a direct binding: the node subscribes ``from_``
    itself (effectors do), so the router has nothing to republish.
    """

    schema: str
    from_: str
    node: str
    deliver_to: str | None


@dataclass(frozen=True)
class Delivered:
    """Publish ``event`` on ``subject``."""

    subject: str
    event: Event


@dataclass(frozen=True)
class Dropped:
    """Do not deliver; ``reason`` is one of :data:`DROP_REASONS`."""

    reason: str
    detail: str


def delivery_subject(spec: NodeSpec) -> str | None:
    """Where the router delivers a binding to ``spec``.

    An agent gets ``events.workspace.<agent>.in``; any other node that
    subscribes a concrete ``events.workspace.<x>.in`` gets that; a node with no
    inbox subscribes its bindings' subjects directly (None).
    """
    if spec.agent is not None:
        return workspace_in_subject(spec.agent)
    for pattern in spec.subscribes:
        tokens = split_subject(pattern)
        is_inbox = len(tokens) == 4 and tokens[:2] == ["events", "workspace"] and tokens[3] == "in"
        if is_inbox and tokens[2] not in ("*", ">"):
            return pattern
    return None


def delivery_id(route: Route, event: Event) -> str:
    """The ``Nats-Msg-Id`` of ``event``'s delivery along ``route``: the event log keeps
    one copy per id within its duplicate window, so routing an event twice (taken again
    from its consumer after a router died before it acked it) delivers it once."""
    return f"{route.schema}.{event.event_id}"


def route_binding(event: Event, route: Route, router: str, now: datetime) -> Delivered | Dropped:
    """Deliver ``event`` along ``route``: loop guard, expiry, binding_id, stamp, hop."""
    if route.deliver_to is None:
        raise ValueError(f"route {route} is a direct binding; the router does not deliver it")
    dropped = _guard(event, router, now)
    if dropped is not None:
        return dropped
    stamped = event.evolve(
        binding_id=event.binding_id or new_binding_id(),
        routed_by_schema=route.schema,
    ).with_hop(router)
    return Delivered(route.deliver_to, stamped)


@dataclass(frozen=True)
class BindingOrigin:
    """Where a turn started: the device whose sensation minted the binding, and the schema."""

    device: str
    schema: str


class BindingMemory:
    """Which device each recent ``binding_id`` came from; bounded, oldest forgotten first."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._origins: OrderedDict[str, BindingOrigin] = OrderedDict()

    def remember(self, binding_id: str, origin: BindingOrigin) -> None:
        """Record (or refresh) where ``binding_id`` started."""
        self._origins[binding_id] = origin
        self._origins.move_to_end(binding_id)
        while len(self._origins) > self.capacity:
            self._origins.popitem(last=False)

    def lookup(self, binding_id: str) -> BindingOrigin | None:
        """The origin of ``binding_id``, if it is still remembered."""
        return self._origins.get(binding_id)

    def __len__(self) -> int:
        return len(self._origins)


def resolve_speak(
    event: Event, subject: str, memory: BindingMemory, router: str, now: datetime
) -> Delivered | Dropped:
    """A device-less ``events.workspace.<agent>.out.speak`` → the device that started the turn."""
    info = parse_subject(subject)
    if info.kind != "speak" or info.device is not None or info.agent is None:
        raise ValueError(f"{subject!r} is not a device-less speak subject")
    dropped = _guard(event, router, now)
    if dropped is not None:
        return dropped
    if event.binding_id is None:
        return Dropped(UNRESOLVED, f"speak on {subject} carries no binding_id to find its device")
    origin = memory.lookup(event.binding_id)
    if origin is None:
        return Dropped(
            UNRESOLVED,
            f"speak on {subject}: binding_id {event.binding_id} started no turn this router "
            "remembers",
        )
    stamped = event.evolve(routed_by_schema=event.routed_by_schema or origin.schema)
    return Delivered(speak_subject(info.agent, origin.device), stamped.with_hop(router))


def _guard(event: Event, router: str, now: datetime) -> Dropped | None:
    if router in event.hops:
        return Dropped(
            LOOPED, f"event {event.event_id} already passed {router} (hops: {list(event.hops)})"
        )
    if event.is_expired(now):
        return Dropped(
            EXPIRED,
            f"event {event.event_id} expired at {event.expires_at.isoformat()} "
            f"(ttl_ms {event.ttl_ms})",
        )
    return None


@dataclass
class RouterCounters:
    """What the router did, for `home status`."""

    routed: int = 0
    resolved_speak: int = 0
    # Events a router took before and never acked (it died routing them), taken again.
    redelivered: int = 0
    routed_by_schema: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    last_error: dict[str, str] = field(default_factory=dict)

    def count_routed(self, schema: str) -> None:
        """Count one delivered binding of ``schema``."""
        self.routed += 1
        self.routed_by_schema[schema] = self.routed_by_schema.get(schema, 0) + 1

    def drop(self, dropped: Dropped) -> None:
        """Count one dropped event and remember why."""
        self.dropped[dropped.reason] += 1
        self.last_error[dropped.reason] = dropped.detail

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return {
            "routed": self.routed,
            "resolved_speak": self.resolved_speak,
            "redelivered": self.redelivered,
            "routed_by_schema": dict(self.routed_by_schema),
            "dropped": dict(self.dropped),
            "last_error": dict(self.last_error),
        }


class RateMeter:
    """Events per second over a sliding window, fed with monotonic timestamps."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque()

    def mark(self, now: float) -> None:
        """Count one event at ``now``."""
        self._times.append(now)
        self._trim(now)

    def rate(self, now: float) -> float:
        """Events per second over the last window."""
        self._trim(now)
        return len(self._times) / self.window_s

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] < now - self.window_s:
            self._times.popleft()
