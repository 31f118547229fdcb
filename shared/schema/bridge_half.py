"""Bridge halves: one side's declaration of what crosses the SSH tunnel, and where it connects.

An edge half says where to connect (``connect``: host, port, user, the pinned
host key, and ``fallbacks``: ``HOST:PORT`` of the other members of a home spread
over machines, serving the same home half, tried in turn when the link drops); a
home half says where it listens (``listen``: host, port, its host
key, the one authorized client key). Both list the subjects they ``export``
(send to the peer) and ``import`` (accept from the peer), and their limits.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.event import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_STRING_BYTES
from shared.schema import fields
from shared.yaml_source import LocatedDict, Reader, load_yaml

SIDES = ("edge", "home")
DEFAULT_PORT = 2222
DEFAULT_OUTBOX_EVENTS = 10_000


@dataclass(frozen=True)
class SubjectDecl:
    """One declared subject (or pattern) and the line that declares it."""

    subject: str
    line: int | None


@dataclass(frozen=True)
class HalfLimits:
    """Per-half limits, enforced on what this half sends and accepts."""

    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES
    outbox_events: int = DEFAULT_OUTBOX_EVENTS


@dataclass(frozen=True)
class Endpoint:
    """``connect`` (edge) or ``listen`` (home). Key fields hold fingerprints or public keys."""

    host: str
    port: int
    user: str | None = None
    host_key: str | None = None
    client_key: str | None = None
    line: int | None = None
    lines: tuple[tuple[str, int], ...] = ()
    # Edge only: (host, port) of further members of the same home, same keys.
    fallbacks: tuple[tuple[str, int], ...] = ()

    def line_of(self, key: str) -> int | None:
        """The line that declares ``key``, else the endpoint's own line."""
        return dict(self.lines).get(key, self.line)

    def addresses(self) -> tuple[Endpoint, ...]:
        """This endpoint, then one like it at each fallback address, in the order to try."""
        others = (
            dataclasses.replace(self, host=h, port=p, fallbacks=()) for h, p in self.fallbacks
        )
        return (self, *others)


@dataclass(frozen=True)
class BridgeHalf:
    """One side of a bridge, as declared in YAML."""

    file: str
    bridge: str
    side: str
    device: str
    endpoint: Endpoint
    exports: tuple[SubjectDecl, ...]
    imports: tuple[SubjectDecl, ...]
    limits: HalfLimits = HalfLimits()
    lines: tuple[tuple[str, int], ...] = ()

    def line_of(self, key: str) -> int | None:
        """The line of a top-level key, if it was declared."""
        return dict(self.lines).get(key)

    @property
    def export_patterns(self) -> tuple[str, ...]:
        """Exported subjects without their lines."""
        return tuple(d.subject for d in self.exports)

    @property
    def import_patterns(self) -> tuple[str, ...]:
        """Imported subjects without their lines."""
        return tuple(d.subject for d in self.imports)

    def digest(self) -> str:
        """A sha256 of what the half declares, stable across formatting and comments."""
        canon = repr(
            (
                self.bridge,
                self.side,
                self.device,
                sorted(self.export_patterns),
                sorted(self.import_patterns),
                self.limits,
            )
        )
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def ssh_fingerprint(key: str) -> str:
    """The OpenSSH ``SHA256:...`` fingerprint of a key.

    ``key`` may already be a fingerprint (returned unchanged) or a public key line
    (``ssh-ed25519 AAAA... comment``).
    """
    key = key.strip()
    if key.startswith("SHA256:"):
        return key
    parts = key.split()
    if len(parts) < 2:
        raise ValueError(f"not an SSH public key or SHA256 fingerprint: {key!r:.60}")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"public key body is not base64: {exc}") from exc
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
    return f"SHA256:{digest}"


def _key_check(value: str) -> str | None:
    try:
        ssh_fingerprint(value)
    except ValueError as exc:
        return str(exc)
    return None


def load_bridge_half(path: str | Path) -> BridgeHalf:
    """Load and validate one bridge half YAML file."""
    return parse_bridge_half(load_yaml(path), str(path))


def parse_bridge_half(doc: Any, file: str) -> BridgeHalf:
    """Validate an already-parsed bridge half document."""
    r = Reader(file)
    top = r.mapping(doc, "")
    r.allow_keys(
        top,
        "",
        (
            "bridge",
            "side",
            "device",
            "description",
            "connect",
            "listen",
            "exports",
            "imports",
            "limits",
        ),
    )
    name = r.get(top, "bridge", "", str, "", check=fields.name_token)
    side = r.get(top, "side", "", str, "", check=fields.one_of(*SIDES))
    device = r.get(top, "device", "", str, "", check=fields.name_token)
    r.get(top, "description", "", str, "", required=False)
    endpoint_key = "connect" if side == "edge" else "listen"
    other_key = "listen" if side == "edge" else "connect"
    if side and other_key in top:
        r.issue(
            top, other_key, other_key, f"a {side} half declares '{endpoint_key}', not '{other_key}'"
        )
    endpoint = Endpoint(host="127.0.0.1", port=DEFAULT_PORT)
    if side:
        ep = r.mapping(top.get(endpoint_key), endpoint_key, top, endpoint_key)
        endpoint = _parse_endpoint(r, ep, endpoint_key, side, top.key_lines.get(endpoint_key))
    exports = r.str_list(top, "exports", "", check=fields.subject_pattern)
    imports = r.str_list(top, "imports", "", check=fields.subject_pattern)
    limits = HalfLimits()
    if "limits" in top:
        lim = r.mapping(top["limits"], "limits", top, "limits")
        r.allow_keys(lim, "limits", ("max_event_bytes", "max_string_bytes", "outbox_events"))
        limits = HalfLimits(
            max_event_bytes=r.get(
                lim,
                "max_event_bytes",
                "limits",
                int,
                DEFAULT_MAX_EVENT_BYTES,
                required=False,
                check=fields.positive,
            ),
            max_string_bytes=r.get(
                lim,
                "max_string_bytes",
                "limits",
                int,
                DEFAULT_MAX_STRING_BYTES,
                required=False,
                check=fields.positive,
            ),
            outbox_events=r.get(
                lim,
                "outbox_events",
                "limits",
                int,
                DEFAULT_OUTBOX_EVENTS,
                required=False,
                check=fields.positive,
            ),
        )
    r.raise_if_any()
    return BridgeHalf(
        file=file,
        bridge=name,
        side=side,
        device=device,
        endpoint=endpoint,
        exports=tuple(SubjectDecl(s, line) for s, line in exports),
        imports=tuple(SubjectDecl(s, line) for s, line in imports),
        limits=limits,
        lines=tuple(top.key_lines.items()),
    )


def _parse_endpoint(r: Reader, ep: LocatedDict, path: str, side: str, line: int | None) -> Endpoint:
    fallbacks: tuple[tuple[str, int], ...] = ()
    if side == "edge":
        r.allow_keys(ep, path, ("host", "port", "user", "host_key", "client_key", "fallbacks"))
        listed = r.str_list(ep, "fallbacks", path, required=False, check=_address_check)
        fallbacks = tuple(_address(text) for text, _ in listed if _address_check(text) is None)
    else:
        r.allow_keys(ep, path, ("host", "port", "user", "host_key", "authorized_key"))
    client_field = "client_key" if side == "edge" else "authorized_key"
    return Endpoint(
        host=r.get(ep, "host", path, str, "127.0.0.1", required=side == "edge"),
        port=r.get(ep, "port", path, int, DEFAULT_PORT, required=False, check=fields.port),
        user=r.get(ep, "user", path, str, None, required=False),
        host_key=r.get(ep, "host_key", path, str, None, required=False, check=_key_check),
        client_key=r.get(ep, client_field, path, str, None, required=False, check=_key_check),
        line=line,
        lines=tuple(ep.key_lines.items()),
        fallbacks=fallbacks,
    )


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _address_check(text: str) -> str | None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        return f"must be HOST:PORT (a port 1-65535), got {text!r}"
    return None
