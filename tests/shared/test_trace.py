"""Marks on the turn and the speech ack: optional, round-trip, refused by name when malformed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.errors import EnvelopeError
from shared.event import Event, new_binding_id
from shared.messages.trace import ASR_FINAL, ENDPOINT, FIRST_AUDIO, VOICE_END, Marks
from shared.messages.voice import SpeechCompleted, Turn

BID = new_binding_id()
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_marks_round_trip_on_the_turn_and_the_ack() -> None:
    marks = Marks("boot-1", {VOICE_END: 10.0, ENDPOINT: 10.3, ASR_FINAL: 10.31})
    turn = Turn("board", BID, "hi", 1.0, (), AT, AT, "vad", trace=marks)
    back = Turn.from_event(Event.from_json(turn.to_event(source="e", sequence_number=0).to_json()))
    assert back.trace == marks
    assert back.trace is not None and back.trace.span_ms(VOICE_END, ENDPOINT) == pytest.approx(300)
    assert back.trace.span_ms(VOICE_END, FIRST_AUDIO) is None
    ack = SpeechCompleted(BID, "board", ok=True, trace=Marks("boot-1", {FIRST_AUDIO: 12.0}))
    event = Event.from_json(ack.to_event(source="e", sequence_number=0).to_json())
    assert SpeechCompleted.from_event(event) == ack


def test_a_payload_without_marks_still_parses() -> None:
    ack = SpeechCompleted(BID, "board", ok=True)
    event = ack.to_event(source="e", sequence_number=0)
    assert "trace" not in event.payload
    assert SpeechCompleted.from_event(event).trace is None


@pytest.mark.parametrize(
    ("trace", "key"),
    [
        ("boot", "payload.trace"),
        ({"marks": {}}, "payload.trace.clock"),
        ({"clock": "b", "marks": []}, "payload.trace.marks"),
        ({"clock": "b", "marks": {"voice_end": "soon"}}, "payload.trace.marks.voice_end"),
        ({"clock": "b", "marks": {"voice_end": None}}, "payload.trace.marks.voice_end"),
    ],
)
def test_malformed_marks_are_refused_by_name(trace: Any, key: str) -> None:
    payload = {"ok": True, "device": "board", "trace": trace}
    event = Event.new("speech.completed", payload, source="e", sequence_number=0, binding_id=BID)
    with pytest.raises(EnvelopeError) as refused:
        SpeechCompleted.from_event(event)
    assert key in str(refused.value)
