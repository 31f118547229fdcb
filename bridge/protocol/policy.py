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
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from bridge.errors import Refused
from bridge.protocol.clock import PeerClock
from shared.errors import EnvelopeError, EnvelopeTooLarge, NotTextOnly, SubjectError
from shared.event import (
    BLOB_MIN_CHARS,
    DEFAULT_TTL_MS,
    MAX_NESTING,
    MAX_TTL_MS,
    TIMESTAMP_YEARS,
    EnvelopeLimits,
    Event,
    check_nesting,
    check_text_only,
)
from shared.schema.bridge_half import BridgeHalf
from shared.subjects import BINDING_TOKEN, check_publish_subject, device_of, matches

# Refusal reasons, which are also the counter keys (``refused.<reason>``).
NOT_DECLARED = "not_declared"
NOT_TEXT = "not_text"
OVERSIZE = "oversize"
MALFORMED = "malformed"
LOOP = "loop"
FOREIGN_DEVICE = "foreign_device"
# The durable outbox could not commit the event (a full disk, a read-only data dir).
UNSTORED = "unstored"
# Verdicts on subjects are cached: a link carries few distinct subjects, many times over.
_SUBJECT_CACHE = 4096
_PASS = ("", "")

# orjson reads integers outside -2**63 .. 2**64 - 1 as floats. Such an integer has at
# least 19 digits (-9223372036854775809), so a run of 19 digits sends the event to the
# exact (slower) standard parser. The run is found by mapping every digit to "0" and
# searching for it: several times faster than a regular expression.
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * 19

_BASE64_TO_A = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-=\\",
    b"A" * 68,
)
_BLOB_RUN = b"A" * BLOB_MIN_CHARS

# The canonical form of a UUID: a subset of what ``uuid.UUID`` accepts (which also takes
# braces, a ``urn:uuid:`` prefix and hyphens anywhere), so a match proves the key valid.
_CANONICAL_UUID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

REASONS = (
    NOT_DECLARED, NOT_TEXT, OVERSIZE, MALFORMED, LOOP, FOREIGN_DEVICE, "outbox_full", UNSTORED
)  # fmt: skip


def hop_name(half: BridgeHalf) -> str:
    """This side's entry in ``hops``: ``bridge:<name>@<side>``."""
    return f"bridge:{half.bridge}@{half.side}"


# Per event: slots, not frozen (docs/architecture.md, "Bridge"); never changed once made.
@dataclass(slots=True)
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
    no string can be longer than the whole text; an audio key is a whole key equal to
    a name once lower-cased, so its characters are ASCII letters (no other character
    lower-cases into a whole name) written unescaped, and the lower-cased bytes hold
    the name between quotes; a data URL is a string starting ``data:``, so the bytes hold
    ``"data:``; a base64 blob is a run of at least :data:`BLOB_MIN_CHARS` bytes of the
    base64 alphabet (``\\/`` counted in).
    """
    # A backslash is one byte to look for, and rare: only then look for the escape.
    if len(data) > limits.max_string_bytes or (b"\\" in data and b"\\u" in data):
        return False
    low = data.lower()
    # Spelled out rather than a loop over AUDIO_KEYS: this runs for every event that
    # crosses, and a generator costs more than the searches (the test checks the list).
    if b'"audio"' in low or b'"pcm"' in low or b'"samples"' in low or b'"wav"' in low:
        return False
    if b'"data:' in low:
        return False
    return len(data) < BLOB_MIN_CHARS or _BLOB_RUN not in data.translate(_BASE64_TO_A)


def surely_envelope(obj: dict[str, Any]) -> tuple[str, float, tuple[str, ...]] | None:
    """``event_id``, expiry and ``hops`` when ``obj`` is certainly a valid envelope; else None.

    None means "in doubt", not "invalid": :meth:`Event.from_dict` then decides, and names
    the key. Every check here is one :meth:`Event.from_dict` makes, or a stricter one
    (exact types, the canonical UUID form), so what this passes, it passes too, at a
    fraction of the cost of building the event. Nesting is not checked here: the
    caller has (:meth:`HalfPolicy._check_text`).
    """
    get = obj.get
    event_id, hops, ttl_ms = get("event_id"), get("hops"), get("ttl_ms", DEFAULT_TTL_MS)
    if not (
        type(event_id) is str
        and _CANONICAL_UUID.fullmatch(event_id) is not None
        and _text(get("event_type"))
        and _text(get("source"))
        and _text(get("origin_node"))
        and _count(get("sequence_number"), _MAX_SEQUENCE)
        and _count(ttl_ms, MAX_TTL_MS)
        and type(get("payload")) is dict
        and get("expectation") is None
        and get("residual") is None
        and _optional_text(get("produced_by_schema"))
        and _optional_text(get("routed_by_schema"))
        and _token(get("binding_id"))
        and _optional_object(get("audit"))
    ):
        return None
    if not (_strings(hops) and _strings(get("seen_by"))):
        return None
    stamp = _aware_timestamp(get("timestamp"))
    if stamp is None:
        return None
    return event_id, stamp.timestamp() + ttl_ms / 1000, tuple(hops or ())


_MAX_SEQUENCE = 2**63 - 1


def _text(value: Any) -> bool:
    return type(value) is str and value != ""


def _optional_text(value: Any) -> bool:
    return value is None or type(value) is str


def _optional_object(value: Any) -> bool:
    return value is None or type(value) is dict


def _count(value: Any, most: int) -> bool:
    return type(value) is int and 0 <= value <= most


def _token(value: Any) -> bool:
    return value is None or (type(value) is str and BINDING_TOKEN.fullmatch(value) is not None)


def _strings(value: Any) -> bool:
    if value is None:
        return True
    if type(value) is not list:
        return False
    # ``not value`` first: most lists here are empty, and all() costs a generator.
    return not value or all(type(item) is str for item in value)


def _aware_timestamp(raw: Any) -> datetime | None:
    """The timestamp, when it is ISO-8601 with a timezone and a year Event accepts."""
    if type(raw) is not str:
        return None
    try:
        stamp = datetime.fromisoformat(raw)
    except ValueError:
        return None
    first, last = TIMESTAMP_YEARS
    if stamp.tzinfo is None or not first <= stamp.year <= last:
        return None
    return stamp


def _delivery_keys(obj: dict[str, Any]) -> tuple[str, float, float, tuple[str, ...]]:
    """``event_id``, timestamp and TTL (seconds) and ``hops`` of an envelope object."""
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
        stamped = stamp.timestamp()
    except (OverflowError, ValueError) as exc:
        raise EnvelopeError("timestamp", f"is out of range: {raw!r}") from exc
    return event_id, stamped, ttl_ms / 1000, tuple(hops)


class HalfPolicy:
    """Enforces one half; ``device`` is the device this link speaks for."""

    def __init__(self, half: BridgeHalf, device: str | None = None) -> None:
        self.half = half
        self.device = device or half.device
        self.hop = hop_name(half)
        self._exports = half.export_patterns
        self._imports = half.import_patterns
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
        self._check_subject(subject, self._exports, "exports")
        obj = self._parse(subject, data)
        try:
            self._check_text(obj, data)
            keys = surely_envelope(obj)
            if keys is None:  # in doubt: the full validation decides, and names the key
                event = Event.from_dict(obj)
                keys = event.event_id, event.expires_at.timestamp(), event.hops
        except NotTextOnly as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: {exc}") from exc
        except EnvelopeError as exc:
            raise Refused(MALFORMED, f"{subject!r}: {exc}") from exc
        return self._cross(subject, obj, *keys)

    def incoming(
        self, subject: str, data: bytes, clock: PeerClock | None = None, now: float = 0.0
    ) -> Crossing:
        """Check an event that arrived from the peer; return it with this side's hop appended.

        The peer's sending side validated the envelope; this side checks what it must not
        take on trust: the subject (declared, this link's device), text-only and limits
        (audio must never reach this bus, whatever the peer runs), no loop, and the keys
        delivery reads (``event_id``, ``timestamp``, ``ttl_ms``, ``hops``).

        When ``clock`` says the peer's events are judged on this side's clock, the event's
        ``timestamp`` is rewritten to when it was made on this side's clock, taken in at
        ``now`` (:meth:`PeerClock.local_stamp`): every part of this side that reads its
        expiry afterwards (routers, agents) then judges it on this side's clock as well.
        """
        self._check_subject(subject, self._imports, "imports")
        obj = self._parse(subject, data)
        try:
            self._check_text(obj, data)
            event_id, stamped, ttl_s, hops = _delivery_keys(obj)
        except NotTextOnly as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: {exc}") from exc
        except EnvelopeError as exc:
            raise Refused(MALFORMED, f"{subject!r}: {exc}") from exc
        if clock is not None and clock.judged_here:
            stamped = clock.local_stamp(stamped, ttl_s, now)
            obj["timestamp"] = datetime.fromtimestamp(stamped, UTC).isoformat()
        return self._cross(subject, obj, event_id, stamped + ttl_s, hops)

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
