"""The sending side's quick envelope proof (``surely_envelope``) never passes what
:meth:`Event.from_dict` refuses, and agrees with it on what delivery reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import Refused
from bridge.protocol import HalfPolicy
from bridge.protocol.policy import MALFORMED, surely_envelope
from shared.event import KNOWN_KEYS, Event
from shared.schema import load_bridge_half

SUBJECT = "events.sensation.board.turn"
EDGE, HOME = "schemas/bridge/board.edge.yaml", "schemas/bridge/board.home.yaml"
KEYS = sorted(KNOWN_KEYS)  # sorted: hypothesis replays examples by index
# Values each key might be given by a careless or hostile producer: the right type in
# odd forms (UUIDs in braces or upper case, naive or far-off timestamps, boundary
# integers) and every wrong type.
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(
        [
            "",
            "{12345678-1234-1234-1234-123456789abc}",
            "urn:uuid:12345678-1234-1234-1234-123456789abc",
            "12345678123412341234123456789abc",
            "12345678-1234-1234-1234-123456789ABC",
            "12345678-1234-1234-1234-123456789abc\n",
            "2026-12-02T10:00:00",
            "2026-12-02T10:00:00+00:00",
            "0001-01-01T00:00:00+00:00",
            "9999-12-31T23:59:59+14:00",
            "1899-12-31T23:00:00-01:00",
            "not a time",
            "b0",
            "has space",
        ]
    ),
    st.integers(min_value=0, max_value=7 * 24 * 3600 * 1000 + 1),
    st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)


def _valid() -> dict[str, Any]:
    event = Event.new(
        "sensation.turn",
        {"text": "what is the weather like tomorrow"},
        source="edge.asr",
        sequence_number=3,
        binding_id="b0123456789abcdef",
        hops=("bridge:x@home",),
    )
    return event.to_dict()


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    obj = _valid()
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=4, unique=True)):
        if draw(st.booleans()):
            del obj[key]
        else:
            obj[key] = draw(ODD)
    if draw(st.booleans()):
        obj[draw(st.text(max_size=8))] = draw(ODD)
    return obj


@settings(max_examples=3000, deadline=None)
@given(envelopes())
def test_what_the_proof_passes_the_full_validation_takes_with_the_same_keys(
    obj: dict[str, Any],
) -> None:
    obj = json.loads(json.dumps(obj))  # as it would arrive: JSON types only
    proven = surely_envelope(obj)
    if proven is None:
        return
    event = Event.from_dict(obj)
    event_id, expires_at, hops = proven
    assert event_id == event.event_id
    assert hops == event.hops
    assert abs(expires_at - event.expires_at.timestamp()) < 1e-3


def test_an_ordinary_event_is_proven_without_building_it() -> None:
    assert surely_envelope(_valid()) is not None


def test_an_envelope_in_doubt_is_still_refused_naming_its_key() -> None:
    policy = HalfPolicy(load_bridge_half(EDGE))
    for key, value in (("event_id", "not-a-uuid"), ("ttl_ms", -1), ("timestamp", "noon")):
        obj = {**_valid(), key: value}
        assert surely_envelope(obj) is None
        with pytest.raises(Refused) as info:
            policy.outgoing(SUBJECT, json.dumps(obj).encode())
        assert info.value.reason == MALFORMED
        assert key in str(info.value)


def test_a_uuid_in_another_form_uuid_accepts_still_crosses() -> None:
    # Stricter than from_dict means in doubt, not refused: the full validation decides.
    policy = HalfPolicy(load_bridge_half(EDGE))
    obj = {**_valid(), "event_id": "{12345678-1234-1234-1234-123456789ABC}"}
    assert surely_envelope(obj) is None
    crossing = policy.outgoing(SUBJECT, json.dumps(obj).encode())
    assert crossing.event_id == obj["event_id"]


@pytest.mark.parametrize("number", [-(2**63) - 1, 2**64, -(10**30), 10**30])
def test_an_integer_beyond_64_bits_crosses_exactly(number: int) -> None:
    # orjson would read these as floats; the policy must pass the event on unchanged.
    edge, home = load_bridge_half(EDGE), load_bridge_half(HOME)
    obj = {**_valid(), "hops": [], "payload": {"text": "hi", "n": number}}
    sent = HalfPolicy(edge).outgoing(SUBJECT, json.dumps(obj).encode())
    received = HalfPolicy(home).incoming(SUBJECT, sent.data)
    assert json.loads(received.data)["payload"]["n"] == number
