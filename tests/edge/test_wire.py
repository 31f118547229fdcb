"""The edge's messages: typed shapes, envelopes that pass the text-only limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from edge.wire import SpeakRequest
from shared.errors import EnvelopeError
from shared.event import EnvelopeLimits, Event, new_binding_id
from shared.messages.voice import SpeechCompleted, Turn, WordTiming
from shared.subjects import parse_subject, speak_subject


def test_a_turn_is_a_text_only_sensation_event_with_its_binding_id() -> None:
    now = datetime.now(UTC)
    words = tuple(WordTiming(f"w{i}", i * 0.3, i * 0.3 + 0.25, 0.9) for i in range(40))
    turn = Turn(
        "board", new_binding_id(), "w0 w1", 0.9, words, now, now + timedelta(seconds=2), "vad"
    )
    event = turn.to_event(source="edge.audio.board", sequence_number=7)
    back = Event.from_json(event.to_json(EnvelopeLimits()), EnvelopeLimits())
    assert parse_subject(turn.subject).kind == "sensation.turn"
    assert back.binding_id == turn.binding_id
    assert back.payload["words"][3] == {
        "word": "w3",
        "start_s": 0.9,
        "end_s": 1.15,
        "confidence": 0.9,
    }


def test_speech_completed_round_trips() -> None:
    ack = SpeechCompleted(new_binding_id(), "board", ok=False, error="device gone")
    event = ack.to_event(source="edge.audio.board", sequence_number=0)
    assert parse_subject(ack.subject).binding_id == ack.binding_id
    assert SpeechCompleted.from_event(Event.from_json(event.to_json())) == ack


def test_speak_requests_need_text_and_a_device_subject() -> None:
    event = Event.new("speak", {"text": "hi"}, source="a", sequence_number=0)
    request = SpeakRequest.from_event(speak_subject("edge_asr", "board"), event)
    assert (request.agent, request.device, request.text) == ("edge_asr", "board", "hi")
    with pytest.raises(EnvelopeError, match=r"payload\.text"):
        SpeakRequest.from_event(
            speak_subject("edge_asr", "board"),
            Event.new("speak", {"text": "  "}, source="a", sequence_number=0),
        )
    with pytest.raises(EnvelopeError, match="not a device speak subject"):
        SpeakRequest.from_event("events.workspace.edge_asr.out.reply.board", event)
