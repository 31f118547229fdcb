"""The envelope: round trips, unknown keys, named errors, expiry, limits, and fuzzing."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shared.errors import EnvelopeError, EnvelopeTooLarge, NotTextOnly
from shared.event import EnvelopeLimits, Event, check_text_only, new_binding_id
from shared.subjects import check_binding_id
from tests.support import json_strategy


def _event(**payload: Any) -> Event:
    return Event.new(
        "sensation.turn",
        payload or {"text": "hello"},
        source="edge.audio.tui",
        sequence_number=3,
        binding_id=new_binding_id(),
    )


def test_round_trip_keeps_every_field() -> None:
    event = _event(text="what time is it", confidence=0.93)
    again = Event.from_json(event.to_json())
    assert again == event
    assert again.to_dict() == event.to_dict()


def test_to_dict_has_every_key_of_the_design_table() -> None:
    keys = set(_event().to_dict())
    assert keys == {
        "event_id", "event_type", "source", "timestamp", "sequence_number", "ttl_ms",
        "payload", "produced_by_schema", "routed_by_schema", "binding_id", "expectation",
        "residual", "origin_node", "hops", "seen_by", "audit",
    }  # fmt: skip


def test_unknown_keys_are_preserved() -> None:
    data = _event().to_dict() | {"future_field": {"x": [1, 2]}, "priority": 7}
    event = Event.from_dict(data)
    assert event.extra == {"future_field": {"x": [1, 2]}, "priority": 7}
    assert json.loads(event.to_json()) == data


def test_with_hop_appends() -> None:
    event = _event().with_hop("router").with_hop("bridge.board")
    assert event.hops == ("router", "bridge.board")


def test_binding_ids_are_fresh_tokens() -> None:
    ids = {new_binding_id() for _ in range(100)}
    assert len(ids) == 100
    for bid in ids:
        check_binding_id(bid)


BROKEN = [
    ("event_id", lambda d: d.pop("event_id"), "missing"),
    ("event_id", lambda d: d.update(event_id="not-a-uuid"), "UUID"),
    ("event_type", lambda d: d.update(event_type=5), "string"),
    ("event_type", lambda d: d.update(event_type=""), "non-empty"),
    ("source", lambda d: d.pop("source"), "missing"),
    ("timestamp", lambda d: d.update(timestamp="yesterday"), "ISO-8601"),
    ("timestamp", lambda d: d.update(timestamp="2026-01-01T00:00:00"), "timezone"),
    ("sequence_number", lambda d: d.update(sequence_number="1"), "integer"),
    ("sequence_number", lambda d: d.update(sequence_number=True), "integer"),
    ("sequence_number", lambda d: d.update(sequence_number=-1), ">= 0"),
    ("ttl_ms", lambda d: d.update(ttl_ms=1.5), "integer"),
    ("ttl_ms", lambda d: d.update(ttl_ms=-5), ">= 0"),
    ("ttl_ms", lambda d: d.update(ttl_ms=10**17), "<= 604800000"),
    ("timestamp", lambda d: d.update(timestamp="9999-12-31T23:59:59+00:00"), "year 9999"),
    ("timestamp", lambda d: d.update(timestamp="0001-01-01T00:00:00+05:00"), "year 1 "),
    ("payload", lambda d: d.update(payload={"x": json.loads("[" * 200 + "]" * 200)}), "deeper"),
    ("payload", lambda d: d.update(payload="hi"), "object"),
    ("payload", lambda d: d.pop("payload"), "missing"),
    ("binding_id", lambda d: d.update(binding_id="a.b"), "token"),
    ("binding_id", lambda d: d.update(binding_id=3), "string"),
    ("hops", lambda d: d.update(hops="router"), "list of strings"),
    ("seen_by", lambda d: d.update(seen_by=[1]), "list of strings"),
    ("audit", lambda d: d.update(audit=[]), "object"),
    ("expectation", lambda d: d.update(expectation={"x": 1}), "reserved"),
    ("origin_node", lambda d: d.pop("origin_node"), "missing"),
]


@pytest.mark.parametrize(("key", "breaks", "says"), BROKEN, ids=[f"{k}-{s}" for k, _, s in BROKEN])
def test_each_malformation_names_its_key(key: str, breaks: Any, says: str) -> None:
    data = _event().to_dict()
    breaks(data)
    with pytest.raises(EnvelopeError) as info:
        Event.from_dict(data)
    assert info.value.key == key
    assert says in str(info.value)
    assert repr(key) in str(info.value)


def test_ttl_defaults_when_absent() -> None:
    data = _event().to_dict()
    del data["ttl_ms"]
    assert Event.from_dict(data).ttl_ms == 60_000


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"event_id": 1}'], ids=str
)
def test_garbage_json_is_an_envelope_error(raw: bytes) -> None:
    with pytest.raises(EnvelopeError):
        Event.from_json(raw)


def test_an_integer_too_long_to_convert_is_an_envelope_error() -> None:
    """Before: ValueError, which neither the router nor `home events` expected."""
    with pytest.raises(EnvelopeError, match="not valid JSON") as info:
        Event.from_json(b'{"sequence_number": ' + b"9" * 5000 + b"}")
    assert info.value.key == "<event>"


def test_nesting_too_deep_for_the_parser_is_an_envelope_error() -> None:
    """Before: RecursionError escaped every handler (router, inbox, `home events`)."""
    with pytest.raises(EnvelopeError, match="nests too deeply") as info:
        Event.from_json(b'{"payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert info.value.key == "<event>"


def test_every_accepted_event_has_a_finite_expiry() -> None:
    """Before: ttl_ms=10**17 or a year-9999 timestamp raised OverflowError in expires_at."""
    data = _event().to_dict() | {"timestamp": "9000-12-31T23:59:59-12:00", "ttl_ms": 604_800_000}
    event = Event.from_dict(data)
    assert not event.is_expired(datetime(2026, 1, 1, tzinfo=UTC))


def test_is_expired_uses_timestamp_plus_ttl() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    event = Event.new("x", {}, source="s", sequence_number=0, ttl_ms=1000, now=t0)
    assert not event.is_expired(t0 + timedelta(milliseconds=1000))
    assert event.is_expired(t0 + timedelta(milliseconds=1001))
    assert event.expires_at == t0 + timedelta(seconds=1)


def test_oversize_event_is_refused_both_ways() -> None:
    limits = EnvelopeLimits(max_event_bytes=2048, max_string_bytes=8192)
    event = _event(text="word " * 600)
    with pytest.raises(EnvelopeTooLarge, match="over the limit of 2048"):
        event.to_json(limits)
    with pytest.raises(EnvelopeTooLarge):
        Event.from_json(event.to_json(), limits)


@pytest.mark.parametrize(
    ("payload", "path", "says"),
    [
        ({"audio": "x"}, "payload.audio", "audio"),
        ({"nested": [{"PCM": []}]}, "payload.nested[0].PCM", "audio"),
        ({"samples": [0.1, 0.2]}, "payload.samples", "audio"),
        ({"clip": {"wav": "x"}}, "payload.clip.wav", "audio"),
        ({"text": "a" * 9000}, "payload.text", "over the limit"),
        ({"blob": "QUJD" * 100}, "payload.blob", "base64"),
        ({"img": "data:image/png;base64,iVBORw0KGgo="}, "payload.img", "base64"),
        ({"raw": b"\x00\x01"}, "payload.raw", "bytes"),
    ],
)
def test_text_only_names_the_offending_path(payload: dict[str, Any], path: str, says: str) -> None:
    with pytest.raises(NotTextOnly) as info:
        check_text_only({"payload": payload}, EnvelopeLimits())
    assert info.value.key == path
    assert says in str(info.value)


def test_text_only_accepts_ordinary_language() -> None:
    check_text_only(
        {"payload": {"text": "The kettle is on. " * 40, "words": [{"w": "hi", "t": 0.1}]}},
        EnvelopeLimits(),
    )


def test_text_only_is_enforced_on_parse_and_serialize() -> None:
    limits = EnvelopeLimits()
    event = _event(text="hi", audio="AAAA")
    with pytest.raises(NotTextOnly):
        event.to_json(limits)
    with pytest.raises(NotTextOnly):
        Event.from_json(event.to_json(), limits)


json_values = json_strategy.json_values()


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from([*_event().to_dict(), "x"]), json_values, max_size=18))
def test_fuzzed_objects_parse_or_name_a_key(data: dict[str, Any]) -> None:
    try:
        event = Event.from_dict(data, EnvelopeLimits())
    except EnvelopeError as exc:
        assert exc.key
        return
    assert Event.from_json(event.to_json()) == event


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
# What the bridge and router suites found in envelopes: a 5,000-digit integer
# (ValueError) and nesting past the parser's recursion limit (RecursionError).
@example(b'{"sequence_number": ' + b"9" * 5000 + b"}")
@example(b'{"payload": ' + b"[" * 5000 + b"]" * 5000 + b"}")
def test_fuzzed_bytes_never_escape_as_other_errors(raw: bytes) -> None:
    with contextlib.suppress(EnvelopeError):
        Event.from_json(raw, EnvelopeLimits())


@settings(max_examples=200, deadline=None)
@given(
    key=st.sampled_from(["event_id", "timestamp", "payload", "hops", "ttl_ms", "binding_id"]),
    value=json_values,
)
def test_mutating_one_valid_key_is_accepted_or_named(key: str, value: Any) -> None:
    data = _event().to_dict()
    data[key] = value
    try:
        Event.from_dict(data)
    except EnvelopeError as exc:
        assert exc.key == key
