"""The one envelope: every message on the bus is an :class:`Event`.

The keys are those of a Tectum event, exactly as τ's builtin ``nats_bus``
extension writes and reads them (``tau_agent_core/extensions_builtin/nats_bus.py``,
``_envelope``), which is our compatibility reference. Unknown keys are kept in
:attr:`Event.extra` and written back out unchanged, so a hop through tether never
loses what a newer peer added.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.errors import EnvelopeError, EnvelopeTooLarge, NotTextOnly
from shared.subjects import BINDING_TOKEN

DEFAULT_TTL_MS = 60_000
DEFAULT_MAX_EVENT_BYTES = 64 * 1024
DEFAULT_MAX_STRING_BYTES = 8 * 1024
# Bounds that keep every later step of an event's life finite: deeper nesting overflows
# recursive code (JSON encoders, walks); a longer TTL or a timestamp outside these years
# overflows ``expires_at``. A week of TTL is already far beyond any turn.
MAX_NESTING = 64
MAX_TTL_MS = 7 * 24 * 3600 * 1000
TIMESTAMP_YEARS = (1900, 9000)

# Keys that would only ever hold sound; refused anywhere in an event.
AUDIO_KEYS = frozenset({"audio", "pcm", "samples", "wav"})

# A long run of base64 alphabet with no spaces is a blob, not language.
BLOB_MIN_CHARS = 256
_BASE64_RUN = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")
_DATA_URL = re.compile(r"^data:[^,]{0,100};base64,", re.IGNORECASE)

KNOWN_KEYS = frozenset(
    (
        "event_id",
        "event_type",
        "source",
        "timestamp",
        "sequence_number",
        "ttl_ms",
        "payload",
        "produced_by_schema",
        "routed_by_schema",
        "binding_id",
        "expectation",
        "residual",
        "origin_node",
        "hops",
        "seen_by",
        "audit",
    )
)
REQUIRED_KEYS = (
    "event_id",
    "event_type",
    "source",
    "timestamp",
    "sequence_number",
    "payload",
    "origin_node",
)


@dataclass(frozen=True)
class EnvelopeLimits:
    """Size limits applied to one event; both configurable per deployment."""

    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES


def new_binding_id() -> str:
    """A fresh binding id: 32 lowercase hex digits, a valid single NATS token."""
    return uuid.uuid4().hex


def new_event_id() -> str:
    """A fresh event id (uuid4, canonical string form)."""
    return str(uuid.uuid4())


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Event:
    """One Tectum event. Build new ones with :meth:`Event.new`."""

    event_id: str
    event_type: str
    source: str
    timestamp: datetime
    sequence_number: int
    payload: dict[str, Any]
    origin_node: str
    ttl_ms: int = DEFAULT_TTL_MS
    produced_by_schema: str | None = None
    routed_by_schema: str | None = None
    binding_id: str | None = None
    expectation: None = None
    residual: None = None
    hops: tuple[str, ...] = ()
    seen_by: tuple[str, ...] = ()
    audit: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(
        cls,
        event_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        sequence_number: int,
        binding_id: str | None = None,
        origin_node: str | None = None,
        ttl_ms: int = DEFAULT_TTL_MS,
        hops: tuple[str, ...] = (),
        audit: dict[str, Any] | None = None,
        now: datetime | None = None,
        produced_by_schema: str | None = None,
    ) -> Event:
        """A new event with a fresh id and the current time."""
        event = cls(
            event_id=new_event_id(),
            event_type=event_type,
            source=source,
            timestamp=now or utc_now(),
            sequence_number=sequence_number,
            payload=payload,
            origin_node=origin_node or source,
            ttl_ms=ttl_ms,
            binding_id=binding_id,
            hops=hops,
            audit=audit or {},
            produced_by_schema=produced_by_schema,
        )
        event.validate()
        return event

    # --- time -----------------------------------------------------------------

    @property
    def expires_at(self) -> datetime:
        """The instant after which this event must be dropped."""
        return self.timestamp + timedelta(milliseconds=self.ttl_ms)

    def is_expired(self, now: datetime | None = None) -> bool:
        """True once ``now`` is past ``timestamp + ttl_ms``."""
        return (now or utc_now()) > self.expires_at

    # --- derived copies --------------------------------------------------------

    def with_hop(self, hop: str) -> Event:
        """A copy with ``hop`` appended to :attr:`hops`."""
        return replace(self, hops=(*self.hops, hop))

    def evolve(self, **changes: Any) -> Event:
        """A copy with the given fields replaced."""
        return replace(self, **changes)

    # --- serialization ---------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON object: every known key present, unknown keys kept."""
        data: dict[str, Any] = dict(self.extra)
        data.update(
            {
                "event_id": self.event_id,
                "event_type": self.event_type,
                "source": self.source,
                "timestamp": self.timestamp.isoformat(),
                "sequence_number": self.sequence_number,
                "ttl_ms": self.ttl_ms,
                "payload": self.payload,
                "produced_by_schema": self.produced_by_schema,
                "routed_by_schema": self.routed_by_schema,
                "binding_id": self.binding_id,
                "expectation": self.expectation,
                "residual": self.residual,
                "origin_node": self.origin_node,
                "hops": list(self.hops),
                "seen_by": list(self.seen_by),
                "audit": self.audit,
            }
        )
        return data

    def to_json(self, limits: EnvelopeLimits | None = None) -> bytes:
        """UTF-8 JSON bytes; with ``limits``, refuse an oversize or non-text event."""
        if limits is not None:
            check_text_only(self.to_dict(), limits)
        try:
            raw = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise NotTextOnly("payload", f"is not JSON-serializable: {exc}") from exc
        data = raw.encode("utf-8")
        if limits is not None and len(data) > limits.max_event_bytes:
            raise EnvelopeTooLarge(len(data), limits.max_event_bytes)
        return data

    @classmethod
    def from_dict(cls, data: Any, limits: EnvelopeLimits | None = None) -> Event:
        """Parse and validate one envelope object; errors name the key."""
        if not isinstance(data, dict):
            raise EnvelopeError("<event>", f"expected a JSON object, got {_kind(data)}")
        check_nesting(data)
        for key in REQUIRED_KEYS:
            if key not in data:
                raise EnvelopeError(key, "is required but missing")
        if limits is not None:
            check_text_only(data, limits)
        for key in ("expectation", "residual"):
            _require_null(data, key)
        event = cls(
            event_id=_str(data, "event_id"),
            event_type=_str(data, "event_type"),
            source=_str(data, "source"),
            timestamp=_timestamp(data),
            sequence_number=_int(data, "sequence_number"),
            payload=_object(data, "payload"),
            origin_node=_str(data, "origin_node"),
            ttl_ms=_int(data, "ttl_ms") if "ttl_ms" in data else DEFAULT_TTL_MS,
            produced_by_schema=_opt_str(data, "produced_by_schema"),
            routed_by_schema=_opt_str(data, "routed_by_schema"),
            binding_id=_opt_str(data, "binding_id"),
            expectation=None,
            residual=None,
            hops=_str_list(data, "hops"),
            seen_by=_str_list(data, "seen_by"),
            audit=_object(data, "audit") if data.get("audit") is not None else {},
            extra={k: v for k, v in data.items() if k not in KNOWN_KEYS},
        )
        event.validate()
        return event

    @classmethod
    def from_json(cls, raw: bytes | str, limits: EnvelopeLimits | None = None) -> Event:
        """Parse UTF-8 JSON bytes (or text); with ``limits``, enforce them first."""
        if limits is not None:
            size = (
                len(raw.encode("utf-8", errors="surrogatepass"))
                if isinstance(raw, str)
                else len(raw)
            )
            if size > limits.max_event_bytes:
                raise EnvelopeTooLarge(size, limits.max_event_bytes)
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        except UnicodeDecodeError as exc:
            raise EnvelopeError("<event>", f"is not valid UTF-8: {exc}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EnvelopeError(
                "<event>", f"is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
            ) from exc
        except RecursionError:
            raise EnvelopeError(
                "<event>", f"nests too deeply to parse (the limit is {MAX_NESTING} levels)"
            ) from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise EnvelopeError("<event>", f"is not valid JSON: {exc}") from exc
        return cls.from_dict(data, limits)

    def validate(self) -> None:
        """Check the invariants that construction alone cannot."""
        try:
            uuid.UUID(self.event_id)
        except ValueError as exc:
            raise EnvelopeError("event_id", f"must be a UUID, got {self.event_id!r}") from exc
        for key in ("event_type", "source", "origin_node"):
            if not getattr(self, key):
                raise EnvelopeError(key, "must be a non-empty string")
        if self.timestamp.tzinfo is None:
            raise EnvelopeError("timestamp", "must carry a timezone (ISO-8601 UTC)")
        first, last = TIMESTAMP_YEARS
        if not first <= self.timestamp.year <= last:
            raise EnvelopeError(
                "timestamp", f"year {self.timestamp.year} is outside {first}..{last}"
            )
        if self.sequence_number < 0:
            raise EnvelopeError("sequence_number", f"must be >= 0, got {self.sequence_number}")
        if not 0 <= self.ttl_ms <= MAX_TTL_MS:
            raise EnvelopeError("ttl_ms", f"must be >= 0 and <= {MAX_TTL_MS}, got {self.ttl_ms}")
        if self.binding_id is not None and not BINDING_TOKEN.fullmatch(self.binding_id):
            raise EnvelopeError(
                "binding_id",
                f"must be one subject token ([A-Za-z0-9_-]+), got {self.binding_id!r}",
            )


def check_text_only(data: Any, limits: EnvelopeLimits) -> None:
    """Refuse anything in ``data`` that is not text: audio keys, bytes, blobs, huge strings.

    Raises :class:`NotTextOnly` naming the path of the first offending value
    (for example ``payload.chunks[2].audio``).
    """
    _check_node(data, None, "", limits)


_SCALARS = (int, float, bool)


def _check_node(value: Any, key: str | None, path: str, limits: EnvelopeLimits) -> None:
    # A plain recursive walk in pre-order, without generator overhead: every
    # event crossing a bridge passes through here twice.
    if key is not None and key.lower() in AUDIO_KEYS:
        raise NotTextOnly(
            path or "<event>", "audio never travels in an event (key names sound data)"
        )
    if isinstance(value, str):
        _check_string(value, path, limits)
    elif isinstance(value, dict):
        for k, v in value.items():
            k_str = str(k)
            if v is None or type(v) in _SCALARS:
                # A leaf that cannot carry sound: only its key needs checking.
                if k_str.lower() in AUDIO_KEYS:
                    raise NotTextOnly(
                        f"{path}.{k_str}" if path else k_str,
                        "audio never travels in an event (key names sound data)",
                    )
                continue
            _check_node(v, k_str, f"{path}.{k_str}" if path else k_str, limits)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if item is None or type(item) in _SCALARS:
                continue
            _check_node(item, None, f"{path}[{i}]", limits)
    elif isinstance(value, bytes | bytearray | memoryview):
        raise NotTextOnly(path or "<event>", "raw bytes are not text")


def _check_string(value: str, path: str, limits: EnvelopeLimits) -> None:
    # UTF-8 needs at most 4 bytes a character: short strings cannot be over the limit.
    if len(value) * 4 > limits.max_string_bytes:
        size = len(value.encode("utf-8", errors="surrogatepass"))
        if size > limits.max_string_bytes:
            raise NotTextOnly(
                path or "<event>",
                f"string of {size} bytes is over the limit of {limits.max_string_bytes}",
            )
    if _looks_like_blob(value):
        raise NotTextOnly(path or "<event>", "looks like a base64-encoded binary blob, not text")


def _looks_like_blob(text: str) -> bool:
    if text[:5].lower() == "data:" and _DATA_URL.match(text):
        return True
    if len(text) < BLOB_MIN_CHARS or not _BASE64_RUN.match(text):
        return False
    try:
        base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=False)
    except (binascii.Error, ValueError):
        return False
    return True


def check_nesting(data: dict[str, Any]) -> None:
    """Refuse containers nested deeper than :data:`MAX_NESTING`, naming the top-level key.

    Iterative, so that checking the depth cannot itself run out of stack.
    """
    containers = (dict, list)
    stack: list[tuple[Any, int, str]] = [
        (value, 2, key) for key, value in data.items() if isinstance(value, containers)
    ]
    while stack:
        value, depth, key = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_NESTING:
            raise EnvelopeError(key, f"nests deeper than {MAX_NESTING} levels")
        stack.extend((c, depth + 1, key) for c in children if isinstance(c, containers))


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _str(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise EnvelopeError(key, f"must be a string, got {_kind(value)}")
    return value


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise EnvelopeError(key, f"must be a string or null, got {_kind(value)}")
    return value


def _int(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise EnvelopeError(key, f"must be an integer, got {_kind(value)}")
    return value


def _object(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data[key]
    if not isinstance(value, dict):
        raise EnvelopeError(key, f"must be a JSON object, got {_kind(value)}")
    return value


def _str_list(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EnvelopeError(key, f"must be a list of strings, got {value!r:.80}")
    return tuple(value)


def _require_null(data: dict[str, Any], key: str) -> None:
    if data.get(key) is not None:
        raise EnvelopeError(key, f"is reserved and must be null, got {_kind(data[key])}")


def _timestamp(data: dict[str, Any]) -> datetime:
    raw = _str(data, "timestamp")
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise EnvelopeError("timestamp", f"must be ISO-8601, got {raw!r}") from exc
    if parsed.tzinfo is None:
        raise EnvelopeError("timestamp", f"must carry a timezone (ISO-8601 UTC), got {raw!r}")
    return parsed
