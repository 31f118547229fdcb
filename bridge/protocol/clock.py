"""Two sides' wall clocks: what a hello says of one, and how the other judges its events. Pure.

An event expires at its ``timestamp`` (the producer's clock) plus ``ttl_ms``. A board
without a real-time clock boots hours off until NTP syncs it, so its timestamps read on
home's clock can make every turn stale, or none. Each side therefore says in its hello
what its clock reads and whether the kernel counts it synced (:class:`ClockReading`),
and the side that reads the hello measures the offset between the two clocks
(:func:`measure`, :class:`PeerClock`).

While both clocks are synced, timestamps compare as they are. Otherwise the receiving
side judges each event of the peer on its own clock, from the moment of intake
(:meth:`PeerClock.local_stamp`): the event's age on the peer's clock, read through the
measured offset, where that age can be true; from intake with its whole TTL where it
cannot (docs/architecture.md "Bridge", bridge/PROTOCOL.md "Clocks").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClockReading:
    """One side's wall clock at one moment (epoch seconds), and whether it is synced."""

    now: float
    synced: bool


@dataclass(frozen=True)
class PeerClock:
    """The peer's clock as this side measured it at the hello.

    ``offset_s`` is the peer's clock less this side's (positive: the peer is ahead),
    low by the hello's transit time at most. ``judged_here`` is True when this side
    judges the peer's events on its own clock: unless both clocks are synced.
    """

    synced: bool
    offset_s: float
    judged_here: bool

    def local_stamp(self, stamped: float, ttl_s: float, now: float) -> float:
        """When an event the peer stamped ``stamped`` was made, on this side's clock.

        ``now`` is this side's clock at intake. Judged as stamped while both clocks
        are synced; otherwise the event's age on the peer's clock (``now`` through the
        offset, less the stamp) counts from intake. An age outside ``0..ttl_s`` cannot be
        true: the sender never sends an event past its TTL on its own clock, so that
        clock moved since the hello (NTP stepped it), and the event gets its whole TTL
        from intake rather than a verdict from a clock known to be wrong.
        """
        if not self.judged_here:
            return stamped
        age = now + self.offset_s - stamped
        if not 0.0 <= age <= ttl_s:
            age = 0.0
        return now - age

    def describe(self) -> dict[str, Any]:
        """JSON-ready, for a side's health report."""
        return {
            "synced": self.synced,
            "offset_ms": round(self.offset_s * 1000),
            "expiry": "judged here from intake" if self.judged_here else "as stamped",
        }


def measure(peer: ClockReading, own: ClockReading) -> PeerClock:
    """The peer's clock from its hello's reading and this side's clock as the hello arrived."""
    return PeerClock(
        synced=peer.synced,
        offset_s=peer.now - own.now,
        judged_here=not (peer.synced and own.synced),
    )
