"""The versioned hello: each side states its bridge, device and half, and checks the peer's.

A hello carries the whole declared half (not only its digest) so that a
mismatched pair is refused with findings that name the difference, using the
same rules as ``bridge check``. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bridge.check import Severity, check_pair
from bridge.errors import FrameError, HelloRefused
from bridge.protocol.clock import ClockReading
from shared.errors import SubjectError
from shared.schema.bridge_half import BridgeHalf, HalfLimits, SubjectDecl
from shared.subjects import split_subject

PROTOCOL_NAME = "tether-bridge"
PROTOCOL_VERSION = 1

# A hello is outside input checked on home's event loop: its lists are bounded before
# any comparison that grows with them. The shipped halves declare at most four
# subjects a list; a subject is a handful of short tokens.
MAX_HELLO_SUBJECTS = 64
MAX_SUBJECT_CHARS = 256
# A clock reading is epoch seconds; past this (year 33658) it is no clock at all, and
# would overflow the datetimes an event's timestamp becomes.
MAX_EPOCH_S = 1e12
# A refusal (the REFUSE frame, the status detail, the log line) names at most this
# many findings, then how many more there were.
MAX_REFUSAL_FINDINGS = 10


@dataclass(frozen=True)
class Resume:
    """Where the sender of the hello stands on the peer's stream: last sequence handled."""

    stream: str | None
    seq: int


@dataclass(frozen=True)
class Hello:
    """One side's hello.

    ``clock`` is optional (bridge/PROTOCOL.md "Clocks"): a hello without it, from a side
    older than the key, gets its events judged as stamped, as before.
    """

    version: int
    bridge: str
    side: str
    device: str
    digest: str
    exports: tuple[str, ...]
    imports: tuple[str, ...]
    limits: HalfLimits
    stream: str
    received: Resume
    clock: ClockReading | None = None

    @classmethod
    def for_half(
        cls,
        half: BridgeHalf,
        stream: str,
        received: Resume,
        clock: ClockReading | None = None,
    ) -> Hello:
        """The hello a side sends for its own half, with its clock when it reads one."""
        return cls(
            version=PROTOCOL_VERSION,
            bridge=half.bridge,
            side=half.side,
            device=half.device,
            digest=half.digest(),
            exports=half.export_patterns,
            imports=half.import_patterns,
            limits=half.limits,
            stream=stream,
            received=received,
            clock=clock,
        )

    def to_body(self) -> dict[str, Any]:
        """The JSON object of the HELLO frame."""
        body: dict[str, Any] = {
            "protocol": PROTOCOL_NAME,
            "version": self.version,
            "bridge": self.bridge,
            "side": self.side,
            "device": self.device,
            "digest": self.digest,
            "exports": list(self.exports),
            "imports": list(self.imports),
            "limits": {
                "max_event_bytes": self.limits.max_event_bytes,
                "max_string_bytes": self.limits.max_string_bytes,
                "outbox_events": self.limits.outbox_events,
            },
            "stream": self.stream,
            "received": {"stream": self.received.stream, "seq": self.received.seq},
        }
        if self.clock is not None:
            body["clock"] = {"synced": self.clock.synced, "now": self.clock.now}
        return body

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Hello:
        """Parse a HELLO frame's object; FrameError names the bad key."""
        if body.get("protocol") != PROTOCOL_NAME:
            raise FrameError(
                f"hello: 'protocol' must be {PROTOCOL_NAME!r}, got {_shown(body.get('protocol'))}"
            )
        limits = _get(body, "limits", dict)
        received = _get(body, "received", dict)
        stream = received.get("stream")
        if stream is not None and not isinstance(stream, str):
            raise FrameError("hello: 'received.stream' must be a string or null")
        return cls(
            version=_get(body, "version", int),
            bridge=_get(body, "bridge", str),
            side=_get(body, "side", str),
            device=_get(body, "device", str),
            digest=_get(body, "digest", str),
            exports=tuple(_subject_list(body, "exports")),
            imports=tuple(_subject_list(body, "imports")),
            limits=HalfLimits(
                max_event_bytes=_get(limits, "max_event_bytes", int),
                max_string_bytes=_get(limits, "max_string_bytes", int),
                outbox_events=_get(limits, "outbox_events", int),
            ),
            stream=_get(body, "stream", str),
            received=Resume(stream, _get(received, "seq", int)),
            clock=_clock(body["clock"]) if "clock" in body else None,
        )

    def as_half(self, like: BridgeHalf) -> BridgeHalf:
        """The peer's half as the hello declares it, with ``like``'s endpoint.

        Endpoints and keys are not compared here: SSH already proved them.
        """
        return replace(
            like,
            file=f"<{self.side} half '{self.bridge}' from hello>",
            bridge=self.bridge,
            side=self.side,
            device=self.device,
            exports=tuple(SubjectDecl(s, None) for s in self.exports),
            imports=tuple(SubjectDecl(s, None) for s in self.imports),
            limits=self.limits,
            lines=(),
        )


def check_hello(own: BridgeHalf, hello: Hello, authenticated_device: str | None) -> BridgeHalf:
    """Accept the peer's hello or raise :class:`HelloRefused` listing every difference.

    ``authenticated_device`` is the device the SSH key proved (home side), or None.
    Returns the peer's half as declared.
    """
    if hello.version != PROTOCOL_VERSION:
        raise HelloRefused(
            f"protocol version {hello.version} is not supported; this side speaks "
            f"version {PROTOCOL_VERSION}"
        )
    findings: list[str] = []
    peer = hello.as_half(own)
    if peer.digest() != hello.digest:
        findings.append(
            f"the hello's digest {hello.digest[:12]}… does not match the half it declares "
            f"({peer.digest()[:12]}…)"
        )
    if authenticated_device is not None and hello.device != authenticated_device:
        findings.append(
            f"the hello says device {hello.device!r} but the SSH key belongs to device "
            f"{authenticated_device!r}"
        )
    if {own.side, peer.side} == {"edge", "home"}:
        edge, home = (peer, own) if peer.side == "edge" else (own, peer)
        pair = check_pair(edge, home)
    else:
        pair = check_pair(peer, own)
    findings.extend(str(f) for f in pair if f.severity is Severity.ERROR)
    if findings:
        raise HelloRefused(
            f"the {peer.side} half of bridge {hello.bridge!r} (device {hello.device!r}) does not "
            f"pair with this {own.side} half ({own.file}): {len(findings)} finding(s)",
            bounded_findings(findings),
        )
    return peer


def bounded_findings(findings: Sequence[str]) -> tuple[str, ...]:
    """The first :data:`MAX_REFUSAL_FINDINGS` findings, then one line counting the rest."""
    if len(findings) <= MAX_REFUSAL_FINDINGS:
        return tuple(findings)
    rest = len(findings) - MAX_REFUSAL_FINDINGS
    return (*findings[:MAX_REFUSAL_FINDINGS], f"… and {rest} more finding(s)")


def _get(obj: dict[str, Any], key: str, kind: type) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FrameError(f"hello: {key!r} must be {kind.__name__}, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    """A peer's value in an error message, without rendering more than 60 characters of it."""
    if isinstance(value, dict | list):
        return f"a {type(value).__name__} of {len(value)}"
    return repr(value[:60] if isinstance(value, str) else value)[:60]


def _clock(value: Any) -> ClockReading:
    """The hello's optional ``clock`` object (bridge/PROTOCOL.md "Clocks")."""
    if not isinstance(value, dict):
        raise FrameError(f"hello: 'clock' must be an object, got {_shown(value)}")
    synced, now = value.get("synced"), value.get("now")
    if not isinstance(synced, bool):
        raise FrameError(f"hello: 'clock.synced' must be true or false, got {_shown(synced)}")
    if (
        isinstance(now, bool)
        or not isinstance(now, int | float)
        or not math.isfinite(now)
        or abs(now) > MAX_EPOCH_S
    ):
        raise FrameError(f"hello: 'clock.now' must be epoch seconds, got {_shown(now)}")
    return ClockReading(float(now), synced)


def _subject_list(obj: dict[str, Any], key: str) -> list[str]:
    value = obj.get(key)
    if not isinstance(value, list):
        raise FrameError(f"hello: {key!r} must be a list of subjects")
    if len(value) > MAX_HELLO_SUBJECTS:
        raise FrameError(
            f"hello: {key!r} lists {len(value)} subjects, over the limit of {MAX_HELLO_SUBJECTS}"
        )
    for i, subject in enumerate(value):
        if not isinstance(subject, str):
            raise FrameError(f"hello: {key}[{i}] must be a string, got {type(subject).__name__}")
        if len(subject) > MAX_SUBJECT_CHARS:
            raise FrameError(
                f"hello: {key}[{i}] is {len(subject)} characters, over the limit of "
                f"{MAX_SUBJECT_CHARS}"
            )
        try:
            split_subject(subject)
        except SubjectError as exc:
            raise FrameError(f"hello: {key}[{i}]: {exc}") from exc
    return value
