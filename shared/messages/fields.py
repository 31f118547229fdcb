"""Readers of one payload field each, raising ``EnvelopeError("payload.<key>", ...)``.

Every message of :mod:`shared.messages` reads its payload through these, so a
malformed field is refused with the same words whichever rail it came in on.
"""

from __future__ import annotations

from typing import Any

from shared.errors import EnvelopeError


def kind_of(value: Any) -> str:
    """A JSON-ish name for the type of ``value``, for error messages."""
    return "null" if value is None else type(value).__name__


def payload_key(key: str) -> str:
    """The envelope path of a payload key, as errors name it."""
    return f"payload.{key}"


def text(payload: dict[str, Any], key: str = "text") -> str:
    """A required string that holds more than whitespace (returned as sent)."""
    value = payload.get(key)
    if not isinstance(value, str) or not value.strip():
        raise EnvelopeError(payload_key(key), f"must be non-empty text, got {value!r:.60}")
    return value


def string(payload: dict[str, Any], key: str, default: str | None = None) -> str:
    """A required string (possibly empty); ``default`` stands in when the key is absent."""
    value = payload.get(key, default)
    if not isinstance(value, str):
        raise EnvelopeError(payload_key(key), f"must be a string, got {kind_of(value)}")
    return value


def opt_string(payload: dict[str, Any], key: str) -> str | None:
    """A string or null (absent reads as null)."""
    value = payload.get(key)
    if value is not None and not isinstance(value, str):
        raise EnvelopeError(payload_key(key), f"must be a string or null, got {value!r:.60}")
    return value


def flag(payload: dict[str, Any], key: str, default: bool | None = None) -> bool:
    """A boolean; ``default`` stands in when the key is absent."""
    value = payload.get(key, default)
    if not isinstance(value, bool):
        raise EnvelopeError(payload_key(key), f"must be true or false, got {value!r:.60}")
    return value


def opt_number(payload: dict[str, Any], key: str, *, path: str | None = None) -> float | None:
    """A number or null (absent reads as null); ``path`` names the key in errors."""
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EnvelopeError(path or payload_key(key), f"must be a number, got {value!r:.60}")
    return float(value)


def opt_int(payload: dict[str, Any], key: str) -> int | None:
    """An integer or null (absent reads as null)."""
    value = payload.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise EnvelopeError(payload_key(key), f"must be an integer or null, got {value!r:.60}")
    return value


def opt_object(payload: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A JSON object or null (absent reads as null)."""
    value = payload.get(key)
    if value is not None and not isinstance(value, dict):
        raise EnvelopeError(payload_key(key), f"must be an object, got {value!r:.60}")
    return value


def array(payload: dict[str, Any], key: str) -> list[Any]:
    """A JSON array; absent or null reads as empty."""
    value = payload.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise EnvelopeError(payload_key(key), f"must be an array, got {value!r:.60}")
    return value


def objects(payload: dict[str, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
    """A JSON array of objects, each with where it stands (``key[i]``) for naming its errors."""
    found = []
    for i, item in enumerate(array(payload, key)):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise EnvelopeError(payload_key(where), f"must be an object, got {item!r:.60}")
        found.append((where, item))
    return found


def item_string(item: dict[str, Any], key: str, where: str) -> str:
    """A required string of one array entry; errors name ``payload.<where>.<key>``."""
    value = item.get(key)
    if not isinstance(value, str):
        raise EnvelopeError(payload_key(f"{where}.{key}"), f"must be a string, got {value!r:.60}")
    return value


def opt_item_string(item: dict[str, Any], key: str, where: str) -> str | None:
    """An optional string of one array entry (absent reads as null); errors name
    ``payload.<where>.<key>``."""
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise EnvelopeError(
            payload_key(f"{where}.{key}"), f"must be a string or null, got {value!r:.60}"
        )
    return value


def words_and_rest(payload: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The words any message carries (its ``text``, on every rail that has words, if it
    is a string) and the rest of its payload, for one-line summaries of any event."""
    text = payload.get("text")
    rest = {k: v for k, v in payload.items() if k != "text"}
    return (text if isinstance(text, str) else None), rest
