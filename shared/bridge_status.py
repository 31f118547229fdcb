"""The ``bridge.status`` event: one bridge half's view of its link, published on its own side.

The bridge publishes it on :func:`shared.subjects.bridge_status_subject` whenever
the link changes state; the edge reads it to say aloud that home is unreachable
instead of going silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.errors import EnvelopeError
from shared.event import Event
from shared.subjects import BRIDGE_STATUS_EVENT_TYPE, bridge_status_subject


@dataclass(frozen=True)
class BridgeStatus:
    """Whether the peer half is reachable right now, and why not when it is not."""

    bridge: str
    reachable: bool
    reason: str | None = None

    @property
    def subject(self) -> str:
        """Where this status is published."""
        return bridge_status_subject(self.bridge)

    def to_event(self, *, source: str, sequence_number: int) -> Event:
        """This status as an envelope of type ``bridge.status``."""
        payload: dict[str, Any] = {"bridge": self.bridge, "reachable": self.reachable}
        if self.reason is not None:
            payload["reason"] = self.reason
        return Event.new(
            BRIDGE_STATUS_EVENT_TYPE, payload, source=source, sequence_number=sequence_number
        )

    @classmethod
    def from_event(cls, event: Event) -> BridgeStatus:
        """Parse a ``bridge.status`` envelope; EnvelopeError names the bad payload key."""
        if event.event_type != BRIDGE_STATUS_EVENT_TYPE:
            raise EnvelopeError(
                "event_type", f"expected {BRIDGE_STATUS_EVENT_TYPE!r}, got {event.event_type!r}"
            )
        payload = event.payload
        bridge = payload.get("bridge")
        reachable = payload.get("reachable")
        reason = payload.get("reason")
        if not isinstance(bridge, str) or not bridge:
            raise EnvelopeError("payload.bridge", f"must be a non-empty string, got {bridge!r}")
        if not isinstance(reachable, bool):
            raise EnvelopeError("payload.reachable", f"must be true or false, got {reachable!r}")
        if reason is not None and not isinstance(reason, str):
            raise EnvelopeError("payload.reason", f"must be a string or null, got {reason!r}")
        return cls(bridge=bridge, reachable=reachable, reason=reason)
