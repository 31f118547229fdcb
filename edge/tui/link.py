"""The link as the status bar shows it, read from ``bridge.status`` events (pure).

The edge bridge node publishes a ``bridge.status`` envelope on its own side's NATS,
on ``events.bridge.<bridge>.status`` (:data:`shared.subjects.BRIDGE_STATUS_PATTERN`),
whenever the link changes and periodically while it is down. It never crosses the
bridge. The payload this module expects (every key but ``bridge`` and the state is
optional)::

    {
      "bridge":  "tui",                 # the bridge's name
      "side":    "edge",                # whose view this is; the TUI shows only "edge"
      "state":   "up" | "down" | "refused",
      "detail":  "link lost",           # why, in words (for down/refused)
      "rtt_ms":  1.7,                   # heartbeat round trip home, smoothed; null if unknown
      "outbox":  3,                     # events queued for home, not yet acked
      "counters": {"rtt_ms": 1.7, ...}  # the bridge's counters
    }

Two spellings from the other halves of the project are accepted as well, so the
TUI reads whichever lands: ``reachable: true|false`` with ``reason`` in place of
``state``/``detail`` (``shared.bridge_status.BridgeStatus``), and ``rtt_ms`` /
``outbox`` found under ``counters`` (or ``queued`` for ``outbox``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.errors import EnvelopeError
from shared.event import Event
from shared.subjects import BRIDGE_STATUS_EVENT_TYPE

LINK_STATES = ("up", "down", "refused")


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
        return self.state == "up"

    @classmethod
    def from_event(cls, event: Event) -> LinkStatus:
        """Parse a ``bridge.status`` envelope; ``EnvelopeError`` names the bad payload key."""
        if event.event_type != BRIDGE_STATUS_EVENT_TYPE:
            raise EnvelopeError(
                "event_type", f"expected {BRIDGE_STATUS_EVENT_TYPE!r}, got {event.event_type!r}"
            )
        p = event.payload
        bridge = p.get("bridge")
        if not isinstance(bridge, str) or not bridge:
            raise EnvelopeError("payload.bridge", f"must be a non-empty string, got {bridge!r:.60}")
        counters = p.get("counters")
        if counters is not None and not isinstance(counters, dict):
            raise EnvelopeError("payload.counters", f"must be an object, got {counters!r:.60}")
        counters = counters or {}
        side = p.get("side")
        if side is not None and not isinstance(side, str):
            raise EnvelopeError("payload.side", f"must be a string, got {side!r:.60}")
        return cls(
            bridge=bridge,
            state=_state(p),
            detail=_detail(p),
            side=side,
            rtt_ms=_number(p, counters, ("rtt_ms",)),
            queued=_count(p, counters, ("outbox", "queued")),
        )


def _state(p: dict[str, Any]) -> str:
    state = p.get("state")
    if state is not None:
        if state not in LINK_STATES:
            raise EnvelopeError(
                "payload.state", f"must be one of {', '.join(LINK_STATES)}, got {state!r:.60}"
            )
        return str(state)
    reachable = p.get("reachable")
    if not isinstance(reachable, bool):
        raise EnvelopeError(
            "payload.state", "is missing (and no boolean 'reachable' stands in for it)"
        )
    return "up" if reachable else "down"


def _detail(p: dict[str, Any]) -> str:
    for key in ("detail", "reason"):
        value = p.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise EnvelopeError(f"payload.{key}", f"must be a string, got {value!r:.60}")
        return value
    return ""


def _number(p: dict[str, Any], counters: dict[str, Any], names: tuple[str, ...]) -> float | None:
    for source, prefix in ((p, "payload"), (counters, "payload.counters")):
        for name in names:
            value = source.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise EnvelopeError(f"{prefix}.{name}", f"must be a number, got {value!r:.60}")
            return float(value)
    return None


def _count(p: dict[str, Any], counters: dict[str, Any], names: tuple[str, ...]) -> int | None:
    value = _number(p, counters, names)
    return None if value is None else int(value)
