"""What one half lets across, in each direction. Pure: no I/O.

Each side enforces its own half (never the peer's promises): a subject must be
declared (exports when sending, imports when receiving), the event must be
text-only within this half's limits, must not already carry this side's hop (a
loop), and must not name another device than the one this link belongs to (on
home: the device the SSH key proved). The sender validates the whole envelope,
the receiver only the keys delivery reads (docs/architecture.md, "Bridge").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from bridge.errors import Refused
from shared.errors import EnvelopeError, EnvelopeTooLarge, NotTextOnly, SubjectError
from shared.event import (
    AUDIO_KEYS,
    BLOB_MIN_CHARS,
    DEFAULT_TTL_MS,
    MAX_NESTING,
    MAX_TTL_MS,
    EnvelopeLimits,
    Event,
    check_nesting,
    check_text_only,
)
from shared.schema.bridge_half import BridgeHalf
from shared.subjects import check_publish_subject, device_of, matches

# Refusal reasons, which are also the counter keys (``refused.<reason>``).
NOT_DECLARED = "not_declared"
NOT_TEXT = "not_text"
OVERSIZE = "oversize"
MALFORMED = "malformed"
LOOP = "loop"
FOREIGN_DEVICE = "foreign_device"
# Verdicts on subjects are cached: a link carries few distinct subjects, many times over.
_SUBJECT_CACHE = 4096
_PASS = ("", "")

# orjson reads integers beyond 64 bits as floats; a run of 20 digits may be one, and then
# the exact (slower) standard parser reads the event instead. Found by mapping every digit
# to "0" and searching for the run: several times faster than a regular expression.
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * 20

_AUDIO_NAMES = tuple(name.encode() for name in AUDIO_KEYS)
_BASE64_TO_A = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-=\\",
    b"A" * 68,
)
_BLOB_RUN = b"A" * BLOB_MIN_CHARS

REASONS = (NOT_DECLARED, NOT_TEXT, OVERSIZE, MALFORMED, LOOP, FOREIGN_DEVICE, "outbox_full")


def hop_name(half: BridgeHalf) -> str:
    """This side's entry in ``hops``: ``bridge:<name>@<side>``."""
    return f"bridge:{half.bridge}@{half.side}"


@dataclass(frozen=True, slots=True)
class Crossing:
    """An event let across: its JSON with this side's hop appended, and what delivery reads."""

    data: bytes
    event_id: str
    expires_at: float
    hops: tuple[str, ...]


def decode_json(data: bytes) -> Any:
    """Parse JSON bytes exactly as :func:`json.loads` would, through orjson where that is exact."""
    if _LONG_DIGITS in data.translate(_DIGITS_TO_ZERO):
        return json.loads(data)
    return orjson.loads(data)


def encode_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON (what :meth:`Event.to_json` writes), through orjson where it can."""
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:  # integers beyond 64 bits
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def surely_text(data: bytes, limits: EnvelopeLimits) -> bool:
    """True when JSON ``data`` certainly passes :func:`check_text_only`; False when in doubt.

    Sound because each thing the walk refuses leaves a trace in the bytes that this
    looks for, and escapes that could hide one (``\\uXXXX``) send it to the walk:
    no string can be longer than the whole text; an audio key, lower-cased, contains
    its name in the lower-cased bytes (no other character lower-cases into those
    letters); a data URL contains ``data:``; a base64 blob is a run of at least
    :data:`BLOB_MIN_CHARS` bytes of the base64 alphabet (``\\/`` counted in).
    """
    if len(data) > limits.max_string_bytes or b"\\u" in data:
        return False
    low = data.lower()
    if any(name in low for name in _AUDIO_NAMES) or b"data:" in low:
        return False
    return len(data) < BLOB_MIN_CHARS or _BLOB_RUN not in data.translate(_BASE64_TO_A)


def _delivery_keys(obj: dict[str, Any]) -> tuple[str, float, tuple[str, ...]]:
    """``event_id``, expiry (epoch seconds) and ``hops`` of an envelope object."""
    event_id = obj.get("event_id")
    if not isinstance(event_id, str) or not event_id:
        raise EnvelopeError("event_id", "must be a non-empty string")
    raw = obj.get("timestamp")
    if not isinstance(raw, str):
        raise EnvelopeError("timestamp", "must be an ISO-8601 string")
    try:
        stamp = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise EnvelopeError("timestamp", f"must be ISO-8601, got {raw!r}") from exc
    if stamp.tzinfo is None:
        raise EnvelopeError("timestamp", f"must carry a timezone (ISO-8601 UTC), got {raw!r}")
    ttl_ms = obj.get("ttl_ms", DEFAULT_TTL_MS)
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 <= ttl_ms <= MAX_TTL_MS:
        raise EnvelopeError("ttl_ms", f"must be an integer in 0..{MAX_TTL_MS}")
    hops = obj.get("hops") or []
    if not isinstance(hops, list) or not all(isinstance(h, str) for h in hops):
        raise EnvelopeError("hops", "must be a list of strings")
    try:
        expires_at = stamp.timestamp() + ttl_ms / 1000
    except (OverflowError, ValueError) as exc:
        raise EnvelopeError("timestamp", f"is out of range: {raw!r}") from exc
    return event_id, expires_at, tuple(hops)


class HalfPolicy:
    """Enforces one half; ``device`` is the device this link speaks for."""

    def __init__(self, half: BridgeHalf, device: str | None = None) -> None:
        self.half = half
        self.device = device or half.device
        self.hop = hop_name(half)
        self._subjects: dict[tuple[str, str], tuple[str, str]] = {}
        self.limits = EnvelopeLimits(
            max_event_bytes=half.limits.max_event_bytes,
            max_string_bytes=half.limits.max_string_bytes,
        )

    def outgoing(self, subject: str, data: bytes) -> Crossing:
        """Check an event about to be sent, in full; return it with this side's hop appended.

        The sending side is where an envelope is validated whole (keys, types, text-only,
        limits): what it lets out is what the receiving side can rely on.
        """
        self._check_subject(subject, self.half.export_patterns, "exports")
        obj = self._parse(subject, data)
        try:
            self._check_text(obj, data)
            event = Event.from_dict(obj)
        except NotTextOnly as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: {exc}") from exc
        except EnvelopeError as exc:
            raise Refused(MALFORMED, f"{subject!r}: {exc}") from exc
        return self._cross(subject, obj, event.event_id, event.expires_at.timestamp(), event.hops)

    def incoming(self, subject: str, data: bytes) -> Crossing:
        """Check an event that arrived from the peer; return it with this side's hop appended.

        The peer's sending side validated the envelope; this side checks what it must not
        take on trust: the subject (declared, this link's device), text-only and limits
        (audio must never reach this bus, whatever the peer runs), no loop, and the keys
        delivery reads (``event_id``, ``timestamp``, ``ttl_ms``, ``hops``).
        """
        self._check_subject(subject, self.half.import_patterns, "imports")
        obj = self._parse(subject, data)
        try:
            self._check_text(obj, data)
            event_id, expires_at, hops = _delivery_keys(obj)
        except NotTextOnly as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: {exc}") from exc
        except EnvelopeError as exc:
            raise Refused(MALFORMED, f"{subject!r}: {exc}") from exc
        return self._cross(subject, obj, event_id, expires_at, hops)

    def _check_text(self, obj: dict[str, Any], data: bytes) -> None:
        """Text-only within the limits (:func:`check_text_only`), walked only when in doubt.

        Depth is at most the number of brackets (strings may hold some too), so when
        those are few no container nests too deeply; and :func:`surely_text` proves most
        events text-only from their bytes alone, several times faster than the walk.
        """
        if data.count(b"{") + data.count(b"[") > MAX_NESTING:
            check_nesting(obj)
        if not surely_text(data, self.limits):
            check_text_only(obj, self.limits)

    def _check_subject(self, subject: str, declared: tuple[str, ...], what: str) -> None:
        key = (what, subject)
        verdict = self._subjects.get(key)
        if verdict is None:
            verdict = self._subject_verdict(subject, declared, what)
            if len(self._subjects) >= _SUBJECT_CACHE:
                self._subjects.clear()
            self._subjects[key] = verdict
        if verdict is not _PASS:
            raise Refused(*verdict)

    def _parse(self, subject: str, data: bytes) -> dict[str, Any]:
        if len(data) > self.limits.max_event_bytes:
            size = EnvelopeTooLarge(len(data), self.limits.max_event_bytes)
            raise Refused(OVERSIZE, f"{subject!r}: {size}")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: the message is not UTF-8 text: {exc}") from exc
        try:
            obj = decode_json(data)
        except RecursionError:
            raise Refused(MALFORMED, f"{subject!r}: the event nests too deeply to parse") from None
        except ValueError as exc:
            raise Refused(MALFORMED, f"{subject!r}: the event is not valid JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise Refused(MALFORMED, f"{subject!r}: the event must be a JSON object")
        return obj

    def _cross(
        self,
        subject: str,
        obj: dict[str, Any],
        event_id: str,
        expires_at: float,
        hops: tuple[str, ...],
    ) -> Crossing:
        if self.hop in hops:
            raise Refused(LOOP, f"{subject!r}: event {event_id} already crossed as {self.hop}")
        hops = (*hops, self.hop)
        # The object as it arrived, with one hop more: keys this side does not know
        # (a newer peer's) pass through unchanged, and nothing is rebuilt.
        obj["hops"] = list(hops)
        try:
            data = encode_json(obj)
        except (TypeError, ValueError) as exc:  # a lone surrogate, taken by json's fallback
            raise Refused(
                NOT_TEXT, f"{subject!r}: the event does not encode as UTF-8 JSON: {exc}"
            ) from exc
        return Crossing(data, event_id, expires_at, hops)

    def _subject_verdict(
        self, subject: str, declared: tuple[str, ...], what: str
    ) -> tuple[str, str]:
        try:
            check_publish_subject(subject)
        except SubjectError as exc:
            return (MALFORMED, str(exc))
        named = device_of(subject)
        if named is not None and named != self.device:
            return (
                FOREIGN_DEVICE,
                f"{subject!r} names device {named!r} but this link is device {self.device!r}",
            )
        if not any(matches(p, subject) for p in declared):
            return (NOT_DECLARED, f"{subject!r} is not in the {what} of {self.half.file}")
        return _PASS
