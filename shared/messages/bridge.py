"""The ``bridge.status`` event: one bridge half's view of its link, published on its own side.

The bridge publishes it on :func:`shared.subjects.bridge_status_subject` whenever
the link changes state (and periodically while it is down); it never crosses the
bridge. The edge reads ``reachable`` and ``reason`` to say aloud that home is
unreachable instead of going silent; the TUI's status bar reads the state, the
round trip and the queue. Two spellings are read: ``state``/``detail`` and
``reachable``/``reason``, either standing in for the other; ``rtt_ms`` and
``outbox`` (or ``queued``) may sit at the top or under ``counters``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages import fields
from shared.messages.message import PayloadMessage
from shared.subjects import bridge_status_subject

BRIDGE_STATUS_EVENT_TYPE = "bridge.status"

LINK_UP, LINK_DOWN, LINK_REFUSED = "up", "down", "refused"
LINK_STATES = (LINK_UP, LINK_DOWN, LINK_REFUSED)


@dataclass(frozen=True)
class BridgeStatus(PayloadMessage):
    """Whether the peer half is reachable right now, why not, and the link's numbers."""

    EVENT_TYPE: ClassVar[str] = BRIDGE_STATUS_EVENT_TYPE

    bridge: str
    reachable: bool
    reason: str | None = None
    state: str | None = None
    detail: str | None = None
    side: str | None = None
    device: str | None = None
    text: str | None = None  # the status in words, to say or show
    rtt_ms: float | None = None
    outbox: int | None = None
    counters: dict[str, Any] | None = None
    changed: bool | None = None  # false on a periodic repeat of an unchanged state

    @property
    def subject(self) -> str:
        """Where this status is published."""
        return bridge_status_subject(self.bridge)

    @property
    def link_state(self) -> str:
        """``up``, ``down`` or ``refused``: the state sent, else what ``reachable`` says."""
        if self.state is not None:
            return self.state
        return LINK_UP if self.reachable else LINK_DOWN

    @property
    def why(self) -> str:
        """Why the link is as it is, in words: ``detail``, else ``reason``, else nothing."""
        if self.detail is not None:
            return self.detail
        return self.reason or ""

    @property
    def round_trip_ms(self) -> float | None:
        """The heartbeat round trip: ``rtt_ms``, else the counter of that name."""
        if self.rtt_ms is not None:
            return self.rtt_ms
        return _counter(self.counters or {}, ("rtt_ms",))

    @property
    def queued(self) -> int | None:
        """Events waiting for the peer: ``outbox``, else the ``outbox``/``queued`` counter."""
        if self.outbox is not None:
            return self.outbox
        value = _counter(self.counters or {}, ("outbox", "queued"))
        return None if value is None else int(value)

    def to_payload(self) -> dict[str, Any]:
        """The payload: ``bridge`` and ``reachable`` always, the rest when set."""
        payload: dict[str, Any] = {}
        if self.text is not None:
            payload["text"] = self.text
        payload.update(bridge=self.bridge, reachable=self.reachable)
        optional = {
            "state": self.state,
            "side": self.side,
            "device": self.device,
            "detail": self.detail,
            "rtt_ms": self.rtt_ms,
            "outbox": self.outbox,
            "counters": self.counters,
            "changed": self.changed,
        }
        if self.reason is not None or self.state is not None:
            payload["reason"] = self.reason
        payload.update({k: v for k, v in optional.items() if v is not None})
        return payload

    @classmethod
    def from_event(cls, event: Event) -> BridgeStatus:
        """Parse a ``bridge.status`` envelope; EnvelopeError names the bad payload key."""
        if not cls.is_type(event.event_type):
            raise EnvelopeError(
                "event_type", f"expected {BRIDGE_STATUS_EVENT_TYPE!r}, got {event.event_type!r}"
            )
        p = event.payload
        bridge = fields.text(p, "bridge")
        state = p.get("state")
        if state is not None and state not in LINK_STATES:
            raise EnvelopeError(
                "payload.state", f"must be one of {', '.join(LINK_STATES)}, got {state!r:.60}"
            )
        if "reachable" in p or state is None:
            if "reachable" not in p:
                raise EnvelopeError(
                    "payload.state", "is missing (and no boolean 'reachable' stands in for it)"
                )
            reachable = fields.flag(p, "reachable")
        else:
            reachable = state == LINK_UP
        counters = fields.opt_object(p, "counters")
        for name in ("rtt_ms", "outbox", "queued"):
            fields.opt_number(counters or {}, name, path=f"payload.counters.{name}")
        rtt_ms = fields.opt_number(p, "rtt_ms")
        outbox = fields.opt_number(p, "outbox")
        if outbox is None:
            outbox = fields.opt_number(p, "queued")
        return cls(
            bridge=bridge,
            reachable=reachable,
            reason=fields.opt_string(p, "reason"),
            state=state,
            detail=fields.opt_string(p, "detail"),
            side=fields.opt_string(p, "side"),
            device=fields.opt_string(p, "device"),
            text=fields.opt_string(p, "text"),
            rtt_ms=rtt_ms,
            outbox=None if outbox is None else int(outbox),
            counters=counters,
            changed=fields.flag(p, "changed") if "changed" in p else None,
        )


def _counter(counters: dict[str, Any], names: tuple[str, ...]) -> float | None:
    for name in names:
        value = fields.opt_number(counters, name, path=f"payload.counters.{name}")
        if value is not None:
            return value
    return None
