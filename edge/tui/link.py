"""The link as the status bar shows it, read from ``bridge.status`` events (pure).

The edge bridge node publishes a ``bridge.status`` envelope on its own side's NATS,
on ``events.bridge.<bridge>.status`` (:data:`shared.subjects.BRIDGE_STATUS_PATTERN`),
whenever the link changes and periodically while it is down. It never crosses the
bridge. The message, and both spellings of its state it accepts, is
:class:`shared.messages.bridge.BridgeStatus`; :class:`LinkStatus` is what the bar
shows of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.event import Event
from shared.messages.bridge import LINK_UP, BridgeStatus


@dataclass(frozen=True)
class LinkStatus:
    """One bridge half's view of its link home."""

    bridge: str
    state: str
    detail: str = ""
    side: str | None = None
    rtt_ms: float | None = None
    queued: int | None = None

    @property
    def up(self) -> bool:
        """True while home is reachable over this bridge."""
        return self.state == LINK_UP

    @classmethod
    def from_status(cls, status: BridgeStatus) -> LinkStatus:
        """What the bar shows of one status message."""
        return cls(
            bridge=status.bridge,
            state=status.link_state,
            detail=status.why,
            side=status.side,
            rtt_ms=status.round_trip_ms,
            queued=status.queued,
        )

    @classmethod
    def from_event(cls, event: Event) -> LinkStatus:
        """Parse a ``bridge.status`` envelope; ``EnvelopeError`` names the bad payload key."""
        return cls.from_status(BridgeStatus.from_event(event))
