"""Per-bridge counters, shown on status subjects, in health checks and in logs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BridgeCounters:
    """What one bridge side has done since it started.

    ``sent``/``received`` count event records on the link (a resend counts again in
    ``sent`` and in ``resent``); ``delivered`` counts events published locally.
    ``bytes_raw_*`` are event bytes before compression, ``bytes_wire_*`` every frame byte.
    ``link_ends`` counts why links ended (refused hellos included), by reason.
    """

    accepted: int = 0
    sent: int = 0
    resent: int = 0
    received: int = 0
    delivered: int = 0
    duplicates: int = 0
    expired: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    bytes_raw_sent: int = 0
    bytes_wire_sent: int = 0
    bytes_raw_received: int = 0
    bytes_wire_received: int = 0
    link_ups: int = 0
    link_downs: int = 0
    link_ends: Counter[str] = field(default_factory=Counter)
    rtt_ms: float | None = None

    def note_rtt(self, sample_ms: float) -> None:
        """Fold one heartbeat round trip into a smoothed RTT (EWMA, as TCP does)."""
        self.rtt_ms = sample_ms if self.rtt_ms is None else 0.875 * self.rtt_ms + 0.125 * sample_ms

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "accepted": self.accepted,
            "sent": self.sent,
            "resent": self.resent,
            "received": self.received,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "expired": self.expired,
            "refused": dict(self.refused),
            "refused_total": sum(self.refused.values()),
            "bytes_raw_sent": self.bytes_raw_sent,
            "bytes_wire_sent": self.bytes_wire_sent,
            "bytes_raw_received": self.bytes_raw_received,
            "bytes_wire_received": self.bytes_wire_received,
            "link_ups": self.link_ups,
            "link_downs": self.link_downs,
            "link_ends": dict(self.link_ends),
            "rtt_ms": None if self.rtt_ms is None else round(self.rtt_ms, 3),
        }
