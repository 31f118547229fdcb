"""What ``home devices`` asks and home answers: the paired devices, and a device removed.

The replies of the ``bridge.devices``, ``bridge.unpair`` and ``bridge.revoke`` control
verbs as types, built by home's bridge component and read by ``home devices``; and
the removal of one device's pairing files (docs/architecture.md "Security").

- **unpair** forgets a device: its halves, its private key and its durable outbox
  go; nothing is kept. The name is free, and pairing it again is a new device.
- **revoke** refuses a device's key for good: its halves and private key go (its
  outbox stays, for the device paired again under its name), and its key is
  recorded in ``revoked.json`` (:mod:`home.bridge.revoked`), refused even if a
  half that authorizes it comes back.

Both stop serving the device at once: the endpoint no longer accepts its key,
every SSH connection made with it is closed, its bus user is removed and
nats-server reloads its users, all without a restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.pair import PairingFiles
from home.bridge.revoked import RevokedKey
from shared import control
from shared.errors import ControlError, SchemaError

# What a device's link shows when the endpoint does not serve it.
NOT_SERVED = "not served"
# A half in the bridge directory that authorizes a revoked key: never served.
KEY_REVOKED = "refused: key revoked"


def _field(data: Any, key: str, kind: type, verb: str) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    # A bool is an int to isinstance; a count must not be read from true or false.
    mistyped = isinstance(value, bool) and kind is not bool
    if mistyped or not isinstance(value, kind):
        raise ControlError(
            control.INTERNAL, f"malformed {verb} reply: {key!r} must be a {kind.__name__}"
        )
    return value


@dataclass(frozen=True)
class PairedDevice:
    """One paired device: its key's fingerprint and its link's state (or why it has none)."""

    device: str
    fingerprint: str
    link: str

    def to_dict(self) -> dict[str, str]:
        """The row as the reply carries it."""
        return {"device": self.device, "fingerprint": self.fingerprint, "link": self.link}

    @classmethod
    def from_dict(cls, data: Any) -> PairedDevice:
        """Read a row; ControlError naming the key that is wrong."""
        verb = control.BRIDGE_DEVICES
        return cls(
            _field(data, "device", str, verb),
            _field(data, "fingerprint", str, verb),
            _field(data, "link", str, verb),
        )


@dataclass(frozen=True)
class DevicesView:
    """``bridge.devices``: every paired device and every key ever revoked."""

    paired: tuple[PairedDevice, ...]
    revoked: tuple[RevokedKey, ...]

    def to_dict(self) -> dict[str, Any]:
        """The result as the reply carries it (and ``home devices list --json`` prints it)."""
        return {
            "paired": [row.to_dict() for row in self.paired],
            "revoked": [record.to_dict() for record in self.revoked],
        }

    @classmethod
    def from_dict(cls, data: Any) -> DevicesView:
        """Read the result; ControlError naming what is wrong."""
        verb = control.BRIDGE_DEVICES
        paired = _field(data, "paired", list, verb)
        revoked = _field(data, "revoked", list, verb)
        try:
            records = tuple(RevokedKey.from_dict(r, "revoked") for r in revoked)
        except SchemaError as exc:
            raise ControlError(control.INTERNAL, f"malformed {verb} reply: {exc}") from exc
        return cls(tuple(PairedDevice.from_dict(row) for row in paired), records)


@dataclass(frozen=True)
class DeviceRemoved:
    """``bridge.unpair`` / ``bridge.revoke``: what was removed, and whether the key is
    now refused for good."""

    device: str
    fingerprint: str
    revoked: bool
    connections_closed: int
    files_removed: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The result as the reply carries it."""
        return {
            "device": self.device,
            "fingerprint": self.fingerprint,
            "revoked": self.revoked,
            "connections_closed": self.connections_closed,
            "files_removed": list(self.files_removed),
        }

    @classmethod
    def from_dict(cls, data: Any, verb: str) -> DeviceRemoved:
        """Read the result of ``verb``; ControlError naming the key that is wrong."""
        files = _field(data, "files_removed", list, verb)
        if not all(isinstance(f, str) for f in files):
            raise ControlError(
                control.INTERNAL, f"malformed {verb} reply: 'files_removed' must list strings"
            )
        return cls(
            _field(data, "device", str, verb),
            _field(data, "fingerprint", str, verb),
            _field(data, "revoked", bool, verb),
            _field(data, "connections_closed", int, verb),
            tuple(files),
        )


def pairing_files(bridge_dir: Path, device: str, outbox: Path | None) -> list[Path]:
    """The files of ``device``'s pairing in ``bridge_dir`` (and its outbox, when given)."""
    files = PairingFiles.of(bridge_dir, device)
    key = files.client_key
    paths = [files.edge_half, files.home_half, key, key.with_name(key.name + ".pub")]
    if outbox is not None:
        # SQLite in WAL mode keeps two files beside the database.
        paths += [outbox, *(outbox.with_name(outbox.name + s) for s in ("-wal", "-shm"))]
    return paths


def remove_files(paths: list[Path]) -> tuple[str, ...]:
    """Remove every file of ``paths`` that exists; the ones removed."""
    removed = []
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(str(path))
    return tuple(removed)
