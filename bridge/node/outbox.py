"""A bridge side's durable delivery state: one SQLite file in WAL mode.

:class:`OutboxStore` keeps what must survive a ``kill -9`` of the side's process
(docs/architecture.md, "Bridge: the durable outbox"):

- ``outbox``: every event this side accepted and the peer has not acknowledged,
  under the sequence number of the current run (renumbered at each start, when
  the side opens a new stream);
- ``seen``: event ids this side delivered on its local NATS, until they expire
  (the receiver's dedupe window), with the peer's stream and the last sequence
  number handled in it, committed together before that sequence is acknowledged.

The file is this process's alone. ``synchronous=NORMAL`` (the default) makes each
commit a write to the WAL without an fsync: a killed process loses nothing (the
kernel holds the write), a power cut may lose the last commits. ``FULL`` fsyncs
every commit and survives a power cut too; ``make bench NAME=bridge`` measures both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bridge.errors import BridgeError
from bridge.protocol import OutboxEntry
from shared.schema.bridge_half import BridgeHalf

Synchronous = Literal["NORMAL", "FULL"]
# The folder, beside a side's pairing files, that ``edge run`` and ``home up`` keep it in.
OUTBOX_DIR = "outbox"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY,
    subject TEXT NOT NULL,
    data BLOB NOT NULL,
    event_id TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS seen (
    event_id TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS seen_expiry ON seen (expires_at);
CREATE TABLE IF NOT EXISTS inbound (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    stream TEXT,
    seq INTEGER NOT NULL,
    committed_at REAL NOT NULL
);
"""


class StoreError(BridgeError):
    """The outbox file cannot be opened or written (names the file and what SQLite said)."""


@dataclass(frozen=True)
class Inbound:
    """How far this side got in the peer's stream, and when that was committed."""

    stream: str | None
    seq: int
    committed_at: float


@dataclass(frozen=True)
class Restored:
    """What a previous run left: unacknowledged events, remembered ids, the inbound point."""

    pending: list[OutboxEntry]
    seen: dict[str, float]
    inbound: Inbound | None


def store_path(directory: Path, half: BridgeHalf) -> Path:
    """The outbox file of ``half`` in ``directory``: one per bridge, side and device."""
    return directory / f"{half.bridge}.{half.side}.{half.device}.sqlite"


class OutboxStore:
    """The durable outbox and dedupe window of one bridge side, in ``path``."""

    def __init__(self, path: Path, synchronous: Synchronous = "NORMAL") -> None:
        self.path = path
        self.synchronous = synchronous
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: autocommit, so each statement outside BEGIN is a commit.
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{path}: cannot open the bridge outbox: {exc}") from exc

    def close(self) -> None:
        """Close the file (everything is already committed)."""
        self._db.close()

    def restore(self, now: float) -> Restored:
        """What the last run left that has not expired by ``now``, in sequence order."""
        try:
            rows = self._db.execute(
                "SELECT seq, subject, data, event_id, expires_at FROM outbox"
                " WHERE expires_at >= ? ORDER BY seq",
                (now,),
            ).fetchall()
            seen = dict(
                self._db.execute(
                    "SELECT event_id, expires_at FROM seen WHERE expires_at >= ?", (now,)
                ).fetchall()
            )
            row = self._db.execute("SELECT stream, seq, committed_at FROM inbound").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read the bridge outbox: {exc}") from exc
        pending = [
            OutboxEntry(int(s), str(sub), bytes(d), str(e), float(x)) for s, sub, d, e, x in rows
        ]
        inbound = Inbound(row[0], int(row[1]), float(row[2])) if row is not None else None
        return Restored(pending, seen, inbound)

    def renumber(self, entries: Iterable[OutboxEntry]) -> None:
        """Replace the outbox with ``entries`` (the restored ones, under this run's numbers)."""
        self._write_many(
            "DELETE FROM outbox",
            "INSERT INTO outbox VALUES (?, ?, ?, ?, ?)",
            [(e.seq, e.subject, e.data, e.event_id, e.expires_at) for e in entries],
        )

    def add(self, entry: OutboxEntry) -> None:
        """Commit one accepted event."""
        self._write(
            "INSERT OR REPLACE INTO outbox VALUES (?, ?, ?, ?, ?)",
            (entry.seq, entry.subject, entry.data, entry.event_id, entry.expires_at),
        )

    def ack(self, seq: int) -> None:
        """The peer handled everything up to ``seq``: forget it."""
        self._write("DELETE FROM outbox WHERE seq <= ?", (seq,))

    def commit_inbound(
        self, stream: str | None, seq: int, delivered: list[tuple[str, float]], now: float
    ) -> None:
        """In one transaction: ids delivered locally, and the peer's sequence handled so far."""
        try:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO seen VALUES (?, ?)", delivered)
            self._db.execute(
                "INSERT OR REPLACE INTO inbound VALUES (1, ?, ?, ?)", (stream, seq, now)
            )
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"{self.path}: cannot commit the receive state: {exc}") from exc

    def expire(self, now: float) -> None:
        """Forget outbox entries and ids past their expiry."""
        try:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM outbox WHERE expires_at < ?", (now,))
            self._db.execute("DELETE FROM seen WHERE expires_at < ?", (now,))
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"{self.path}: cannot expire entries: {exc}") from exc

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        try:
            self._db.execute(sql, args)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot write the bridge outbox: {exc}") from exc

    def _write_many(self, clear: str, sql: str, rows: list[tuple[object, ...]]) -> None:
        try:
            self._db.execute("BEGIN")
            self._db.execute(clear)
            self._db.executemany(sql, rows)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise StoreError(f"{self.path}: cannot write the bridge outbox: {exc}") from exc

    def _rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
