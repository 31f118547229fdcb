"""Per-bridge delivery state that outlives any one connection. Pure: no I/O, no clocks.

:class:`Outbox` holds what was sent but not yet acknowledged, in sequence order;
:class:`ReceiveState` remembers the last sequence handled from the peer's stream;
:class:`Deduper` remembers event ids until they expire, so an event that reaches a
receiver twice (a resend across a reset stream) is delivered once.
Times are wall-clock seconds (``time.time()``) passed in by the caller.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass

from bridge.errors import OutboxFull


def new_stream_id() -> str:
    """A fresh stream id: names one sender's sequence space (changes when a side restarts)."""
    return secrets.token_hex(8)


# Per event: slots, not frozen (docs/architecture.md, "Bridge"); never changed once made.
@dataclass(slots=True)
class OutboxEntry:
    """One event waiting for the peer's acknowledgement."""

    seq: int
    subject: str
    data: bytes
    event_id: str
    expires_at: float


class Outbox:
    """A bounded, sequence-ordered store of unacknowledged events."""

    def __init__(self, capacity: int, stream: str | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"outbox capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.stream = stream or new_stream_id()
        self._entries: OrderedDict[int, OutboxEntry] = OrderedDict()
        # Expired after being sent but before any ack: the peer may have handled (and
        # counted) them, so they are only counted here once the next hello says it did not.
        self._in_doubt: dict[int, OutboxEntry] = {}
        self._next_seq = 1
        self.acked_seq = 0
        # Highest sequence sent on the current link (reset at each hello to what the peer
        # says it has), and highest ever sent (to tell resends from first sends).
        self.sent_high = 0
        self.ever_sent_high = 0

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, subject: str, data: bytes, event_id: str, expires_at: float) -> OutboxEntry:
        """Store one event under the next sequence number; OutboxFull when at capacity."""
        if len(self._entries) >= self.capacity:
            raise OutboxFull(self.capacity)
        entry = OutboxEntry(self._next_seq, subject, data, event_id, expires_at)
        self._entries[entry.seq] = entry
        self._next_seq += 1
        return entry

    def ack(self, seq: int) -> int:
        """Forget everything up to ``seq`` (cumulative); returns how many entries that was."""
        removed = 0
        while self._entries:
            first = next(iter(self._entries))
            if first > seq:
                break
            del self._entries[first]
            removed += 1
        self.acked_seq = max(self.acked_seq, min(seq, self._next_seq - 1))
        for doubtful in [s for s in self._in_doubt if s <= seq]:
            del self._in_doubt[doubtful]
        return removed

    def mark_sent(self, entry: OutboxEntry) -> bool:
        """Note that ``entry`` went out on the link; True if it had gone out before (a resend)."""
        self.sent_high = max(self.sent_high, entry.seq)
        if entry.seq <= self.ever_sent_high:
            return True
        self.ever_sent_high = entry.seq
        return False

    def restart(self, peer_seq: int | None) -> list[OutboxEntry]:
        """A new link: the peer's hello says it handled up to ``peer_seq`` of this stream.

        ``None`` means the peer has no record of this stream (it restarted): all is resent.
        Everything still pending counts as never sent on this link; expired entries the
        peer never received are returned, for this side to count.
        """
        if peer_seq is not None:
            self.ack(peer_seq)
        self.sent_high = peer_seq or 0
        lost = list(self._in_doubt.values())
        self._in_doubt.clear()
        return lost

    def contains(self, seq: int) -> bool:
        """True while ``seq`` is unacknowledged and not expired out."""
        return seq in self._entries

    def pending(self) -> list[OutboxEntry]:
        """Every unacknowledged entry, in sequence order (what a new link resends)."""
        return list(self._entries.values())

    def remove(self, seq: int) -> None:
        """Drop one entry (it expired)."""
        self._entries.pop(seq, None)

    def drop_expired(self, now: float) -> list[OutboxEntry]:
        """Remove every entry past its expiry; return those never sent (certainly undelivered).

        Expired entries that were sent are set aside until the peer's next ack or
        hello says whether it handled them (see :meth:`resolve_in_doubt`).
        """
        gone = [e for e in self._entries.values() if e.expires_at < now]
        never_sent = []
        for entry in gone:
            del self._entries[entry.seq]
            if entry.seq <= self.sent_high:
                self._in_doubt[entry.seq] = entry
            else:
                never_sent.append(entry)
        return never_sent


class ReceiveState:
    """The last sequence number handled from the peer's current stream."""

    def __init__(self) -> None:
        self.stream: str | None = None
        self.seq = 0

    def attach(self, stream: str) -> bool:
        """Note the peer's stream at hello; True if it is a new stream (the peer restarted)."""
        if stream == self.stream:
            return False
        self.stream = stream
        self.seq = 0
        return True

    def accept(self, seq: int) -> bool:
        """True if ``seq`` is new; False for a resend of something already handled."""
        if seq <= self.seq:
            return False
        self.seq = seq
        return True


class Deduper:
    """Event ids seen recently, kept until their events expire, at most ``capacity`` of them."""

    def __init__(self, capacity: int = 200_000) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, float] = OrderedDict()
        # The ``now`` of the last sweep: a frame's records share theirs, so one sweep serves all.
        self._swept_at: float | None = None

    def __len__(self) -> int:
        return len(self._seen)

    def first_time(self, event_id: str, expires_at: float, now: float) -> bool:
        """Record ``event_id``; True the first time it is seen within its lifetime."""
        if self.seen(event_id, now):
            return False
        self.remember(event_id, expires_at)
        return True

    def seen(self, event_id: str, now: float) -> bool:
        """True if ``event_id`` was remembered and has not expired by ``now``."""
        if now != self._swept_at or len(self._seen) >= self.capacity:
            self._forget(now)
            self._swept_at = now
        return event_id in self._seen

    def remember(self, event_id: str, expires_at: float) -> None:
        """Keep ``event_id`` until ``expires_at`` (its event was delivered)."""
        self._seen[event_id] = expires_at

    def forget(self, event_id: str) -> None:
        """Drop one id (its delivery failed, so its resend must not count as a duplicate)."""
        self._seen.pop(event_id, None)

    def _forget(self, now: float) -> None:
        # Mostly in expiry order (events arrive roughly in time order); an id kept a
        # little past its expiry only costs memory, never correctness.
        while self._seen:
            event_id, expires_at = next(iter(self._seen.items()))
            if expires_at >= now and len(self._seen) < self.capacity:
                break
            del self._seen[event_id]
