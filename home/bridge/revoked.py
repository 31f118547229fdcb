"""The board keys home refuses for good: ``DATA_DIR/bridge/revoked.json``.

``home devices revoke DEVICE`` records the device's key here before it removes the
pairing, and the record is never taken back. Every look at the paired halves
(the endpoint's accepted keys, the bus users) leaves out a half whose key is
listed, so a half copied back from a backup cannot bring a revoked key back to
life; pairing the device again makes a new key, which is not listed.

The file is one JSON object, written whole and replaced atomically::

    {"revoked": [{"device": "kitchen", "fingerprint": "SHA256:...",
                  "key": "ssh-ed25519 AAAA... tether-kitchen", "revoked_at": "2026-..."}]}

A file that does not parse is an error naming it (a :class:`SchemaError`), never
an empty list: a revocation that cannot be read must not let its key back in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.errors import SchemaError, SchemaIssue
from shared.files import write_atomic

REVOKED_FILE = "revoked.json"


@dataclass(frozen=True)
class RevokedKey:
    """One revoked key: the device it spoke for, its fingerprint, the public key, when."""

    device: str
    fingerprint: str
    key: str
    revoked_at: str

    def to_dict(self) -> dict[str, str]:
        """The record as the file and the ``bridge.devices`` reply carry it."""
        return {
            "device": self.device,
            "fingerprint": self.fingerprint,
            "key": self.key,
            "revoked_at": self.revoked_at,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> RevokedKey:
        """Read one record; SchemaError naming ``where`` and the key that is wrong."""
        if not isinstance(data, dict):
            raise _malformed(where, "", "must be an object")
        values = {}
        for name in ("device", "fingerprint", "key", "revoked_at"):
            value = data.get(name)
            if not isinstance(value, str) or not value:
                raise _malformed(where, name, "must be a non-empty string")
            values[name] = value
        return cls(**values)


def _malformed(file: str, key: str, message: str) -> SchemaError:
    return SchemaError([SchemaIssue(file, None, key, message)])


class RevokedKeys:
    """The revocation record of one bridge directory, read again only when it changed."""

    def __init__(self, bridge_dir: Path) -> None:
        self.path = bridge_dir / REVOKED_FILE
        self._read: tuple[tuple[int, int, int], tuple[RevokedKey, ...]] | None = None

    def load(self) -> tuple[RevokedKey, ...]:
        """Every revoked key, oldest first; SchemaError if the file is unreadable."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise _malformed(str(self.path), "", f"cannot be read: {exc.strerror}") from exc
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if self._read is not None and self._read[0] == stamp:
            return self._read[1]
        records = self._parse()
        self._read = (stamp, records)
        return records

    def _parse(self) -> tuple[RevokedKey, ...]:
        where = str(self.path)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise _malformed(where, "", f"cannot be read: {exc.strerror}") from exc
        except (ValueError, RecursionError) as exc:
            raise _malformed(where, "", f"is not JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("revoked"), list):
            raise _malformed(where, "revoked", "must be a list of revoked keys")
        return tuple(
            RevokedKey.from_dict(item, f"{where}: revoked[{i}]")
            for i, item in enumerate(data["revoked"])
        )

    def fingerprints(self) -> frozenset[str]:
        """The fingerprints of every revoked key."""
        return frozenset(record.fingerprint for record in self.load())

    def add(self, record: RevokedKey) -> None:
        """Record one more revoked key, durably, before anything else of the revocation."""
        records = [*self.load(), record]
        text = json.dumps({"revoked": [r.to_dict() for r in records]}, indent=2) + "\n"
        write_atomic(self.path, text, private=True, durable=True)
