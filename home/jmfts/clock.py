"""Time as JMFTS stores it (UTC ISO-8601, microseconds: sortable as text) and says it."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def to_stored(moment: datetime) -> str:
    """A datetime as stored: UTC, microseconds, ``+00:00``; naive values are read as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_stored(text: str | None) -> datetime | None:
    """Parse a stored timestamp back to an aware datetime."""
    return None if text is None else datetime.fromisoformat(text)


_UNITS: tuple[tuple[str, float], ...] = (
    ("year", 365.25 * 86400),
    ("month", 30.44 * 86400),
    ("week", 7 * 86400),
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
)


def age_in_words(then: datetime, now: datetime | None = None) -> str:
    """How long ago ``then`` was, the way a person says it: "3 weeks ago", "just now"."""
    seconds = ((now or utc_now()) - then).total_seconds()
    if seconds < 0:
        return "in the future"
    for unit, size in _UNITS:
        count = int(seconds // size)
        if count >= 1:
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"
