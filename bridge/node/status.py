"""The local ``bridge.status`` event: link state and counters, on each side's own NATS.

The message is :class:`shared.messages.bridge.BridgeStatus`: ``bridge``, ``reachable``
and ``reason`` are what the edge reads; the rest (a sentence to say, the state, the
counters) is for people and monitors.
"""

from __future__ import annotations

from typing import Any

from shared.event import Event
from shared.messages.bridge import LINK_REFUSED, LINK_UP, BridgeStatus
from shared.subjects import bridge_status_subject


def status_subject(bridge: str) -> str:
    """``events.bridge.<bridge>.status``: never exported, so it stays on its side."""
    return bridge_status_subject(bridge)


def status_text(side: str, state: str, detail: str) -> str:
    """A sentence a person (or the board's TTS) can say about the link."""
    peer = "home" if side == "edge" else "the board"
    if state == LINK_UP:
        return f"Connected to {peer}."
    if state == LINK_REFUSED:
        return f"{peer.capitalize()} refused the bridge: {detail}"
    return f"Cannot reach {peer}: {detail}" if detail else f"Cannot reach {peer}."


def status_event(
    *,
    bridge: str,
    side: str,
    device: str,
    state: str,
    detail: str,
    counters: dict[str, Any],
    sequence_number: int,
    changed: bool | None = None,
) -> Event:
    """A ``bridge.status`` event; ``payload.text`` says it in words."""
    status = BridgeStatus(
        bridge=bridge,
        reachable=state == LINK_UP,
        reason=None if state == LINK_UP else (detail or state),
        state=state,
        detail=detail,
        side=side,
        device=device,
        text=status_text(side, state, detail),
        counters=counters,
        changed=changed,
    )
    return status.to_event(source=f"bridge.{bridge}.{side}", sequence_number=sequence_number)
