"""The bytes-only text proof (``surely_text``) never passes what the full walk refuses."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import Refused
from bridge.protocol import HalfPolicy
from bridge.protocol.policy import surely_text
from shared.errors import NotTextOnly
from shared.event import AUDIO_KEYS, EnvelopeLimits, Event, check_text_only
from shared.schema import load_bridge_half

LIMITS = EnvelopeLimits(max_event_bytes=64 * 1024, max_string_bytes=8 * 1024)
BLOB = "QUJD" * 80  # 320 characters of base64


def _refused_by_walk(obj: Any, limits: EnvelopeLimits = LIMITS) -> bool:
    try:
        check_text_only(obj, limits)
    except NotTextOnly:
        return True
    return False


def _event(payload: dict[str, Any]) -> dict[str, Any]:
    event = Event.new("sensation.turn", {"text": "hi"}, source="t", sequence_number=1)
    return {**event.to_dict(), "payload": payload}


def test_only_two_non_ascii_characters_lower_case_into_ascii() -> None:
    # The proof looks for audio key names in lower-cased bytes: it relies on no other
    # character lower-casing into their letters. U+0130 becomes "i" plus a combining dot
    # (two characters, so never a whole audio key) and U+212A becomes "k" (in none).
    found = {c for c in range(0x80, sys.maxunicode + 1) if any(x.isascii() for x in chr(c).lower())}
    assert found == {0x130, 0x212A}
    assert not any("k" in name for name in AUDIO_KEYS)


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(_event({"AUDIO": "x"})).encode(),
        json.dumps(_event({"nested": [{"Pcm": 1}]})).encode(),
        json.dumps(_event({"x": "data:audio/wav;base64,AAAA"})).encode(),
        json.dumps(_event({"x": "DATA:text/plain;base64,AAAA"})).encode(),
        json.dumps(_event({"x": BLOB})).encode(),
        # the same blob with every "/" escaped, and an audio key spelled in escapes
        json.dumps(_event({"x": BLOB.replace("QU", "Q/")})).replace("/", "\\/").encode(),
        json.dumps(_event({"\\u0061udio": "x"})).replace("\\\\u", "\\u").encode(),
        json.dumps(_event({"x": "word " * 2000})).encode(),
    ],
)
def test_what_the_walk_refuses_is_never_proven_text(raw: bytes) -> None:
    assert _refused_by_walk(json.loads(raw))
    assert not surely_text(raw, LIMITS)


@pytest.mark.parametrize("name", sorted(AUDIO_KEYS))
def test_no_audio_key_is_ever_proven_text(name: str) -> None:
    # The proof spells the names out: every one of AUDIO_KEYS must be among them.
    for key in (name, name.upper(), name.capitalize()):
        raw = json.dumps(_event({"chunk": {key: "x"}})).encode()
        assert _refused_by_walk(json.loads(raw))
        assert not surely_text(raw, LIMITS)


def test_an_ordinary_event_is_proven_text_without_the_walk() -> None:
    raw = Event.new(
        "sensation.turn",
        {"text": "what is the weather like tomorrow"},
        source="t",
        sequence_number=1,
    ).to_json()
    assert surely_text(raw, LIMITS)


def test_an_escaped_audio_key_is_refused_on_receipt() -> None:
    policy = HalfPolicy(load_bridge_half("schemas/bridge/board.home.yaml"))
    raw = json.dumps(_event({"\\u0041UDIO": "x"})).replace("\\\\u", "\\u").encode()
    with pytest.raises(Refused) as info:
        policy.incoming("events.sensation.board.turn", raw)
    assert info.value.reason == "not_text"


_KEYS = st.sampled_from(["text", "audio", "Wav", "SAMPLES", "pcm", "x/y", "é", "\u0130", "k"])
_STRINGS = st.one_of(
    st.text(max_size=40),
    st.sampled_from([BLOB, BLOB[:255], "data:x;base64,AA", "a\\/b", "\u212a" * 3, "audio"]),
    st.text(alphabet="ABCabc012+/_-=", min_size=250, max_size=300),
)
_VALUES = st.recursive(
    st.one_of(st.none(), st.integers(), st.booleans(), _STRINGS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(_KEYS, st.text(max_size=8)), inner, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(
    payload=st.dictionaries(st.one_of(_KEYS, st.text(max_size=8)), _VALUES, max_size=5),
    ascii_only=st.booleans(),
    escape_slash=st.booleans(),
    small=st.booleans(),
)
def test_surely_text_implies_the_walk_passes(
    payload: dict[str, Any], ascii_only: bool, escape_slash: bool, small: bool
) -> None:
    limits = EnvelopeLimits(max_string_bytes=200 if small else 8 * 1024)
    raw = json.dumps(_event(payload), ensure_ascii=ascii_only)
    if escape_slash:
        raw = raw.replace("/", "\\/")
    data = raw.encode("utf-8", errors="surrogatepass")
    if surely_text(data, limits):
        assert not _refused_by_walk(json.loads(raw), limits)


def test_long_integers_cross_exactly() -> None:
    policy = HalfPolicy(load_bridge_half("schemas/bridge/board.home.yaml"))
    big = 2**70 + 1
    raw = json.dumps(_event({"text": "hi", "n": big})).encode()
    crossing = policy.incoming("events.sensation.board.turn", raw)
    assert json.loads(crossing.data)["payload"]["n"] == big
    assert json.loads(crossing.data)["hops"] == ["bridge:board@home"]
