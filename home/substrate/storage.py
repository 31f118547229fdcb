"""Whether the data directory can still be written: the ``storage`` component of ``home up``.

Everything home keeps is under its data directory: the event log (JetStream's
``nats/``), memory (``jmfts/``), the bridge outboxes (``bridge/outbox/``), the
sessions. A full disk or a read-only remount fails each of them in its own
way, mostly as a write error deep in a request. This component says it first,
in ``home status``, naming the path: unhealthy while any filesystem under the
data directory is read-only or has less than :data:`MIN_FREE_BYTES` left
(docs/architecture.md, "Home: full disks"). It runs nothing: per filesystem and
health check, a ``statvfs`` and a probe file made and removed (a disk that fails
turns itself read-only without ``statvfs`` saying so).

Its start fails the same way, so ``home up`` on a read-only or full data directory
stops at once saying which, and a restart after three failed checks stays
unhealthy ("restart failed", with the same words) instead of reading as healthy.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from home.substrate.component import ComponentInfo, Health
from home.substrate.errors import ComponentError
from shared.lifecycle import Service

#: Below this a store's next write may fail: JetStream, SQLite and FAISS all write in
#: pages and journals, not single bytes.
MIN_FREE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Room:
    """One filesystem under the data directory, as a path on it sees it now."""

    path: Path
    free_bytes: int
    read_only: bool

    def fault(self, min_free: int) -> str | None:
        """Why nothing more may be written here, or None."""
        if self.read_only:
            return f"{self.path}: the filesystem is read-only"
        if self.free_bytes < min_free:
            return (
                f"{self.path}: {self.free_bytes // 1024} KiB free, under the"
                f" {min_free // 1024} KiB its stores need"
            )
        return None


PROBE = ".storage-probe"


def _unwritable(folder: Path) -> bool:
    """True when a file cannot be made in ``folder`` (a filesystem an error turned
    read-only still reports itself read-write to ``statvfs`` and ``access``)."""
    probe = folder / PROBE
    try:
        descriptor = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    except OSError as exc:
        return exc.errno == errno.EROFS
    os.close(descriptor)
    probe.unlink(missing_ok=True)
    return False


def rooms(data_dir: Path) -> list[Room]:
    """One :class:`Room` per filesystem holding ``data_dir`` or a folder directly in it."""
    found: dict[int, Room] = {}
    folders = [data_dir, *sorted(p for p in data_dir.iterdir() if p.is_dir())]
    for folder in folders:
        try:
            device = folder.stat().st_dev
            stats = os.statvfs(folder)
        except OSError:
            continue  # removed since the listing: nothing is kept there now
        if device not in found:
            found[device] = Room(
                folder,
                stats.f_bavail * stats.f_frsize,
                bool(stats.f_flag & os.ST_RDONLY) or _unwritable(folder),
            )
    return list(found.values())


class StorageComponent(Service):
    """Healthy while every filesystem under the data directory can take writes."""

    name = "storage"

    def __init__(self, data_dir: Path, min_free_bytes: int = MIN_FREE_BYTES) -> None:
        self.data_dir = data_dir
        self.min_free_bytes = min_free_bytes

    def check(self) -> Health:
        """The faults of every filesystem, or how much room is left (the least of them)."""
        try:
            found = rooms(self.data_dir)
        except OSError as exc:
            return Health(False, f"{self.data_dir}: cannot be read: {exc.strerror or exc}")
        faults = [fault for room in found if (fault := room.fault(self.min_free_bytes))]
        if faults:
            return Health(False, "; ".join(faults))
        least = min(found, key=lambda room: room.free_bytes)
        return Health(True, f"{least.free_bytes // (1024 * 1024)} MiB free at {least.path}")

    async def start(self) -> None:
        """Refuse to start on a data directory that cannot take writes (says which path)."""
        health = self.check()
        if not health.ok:
            raise ComponentError(f"the data directory cannot take writes: {health.detail}")

    async def health(self) -> Health:
        """What :meth:`check` says now."""
        return self.check()

    def info(self) -> ComponentInfo:
        """The data directory."""
        return ComponentInfo(str(self.data_dir), None)
