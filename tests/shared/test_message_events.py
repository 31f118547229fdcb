"""Each message owns its event: its type constant, the event it builds, the type it knows."""

from __future__ import annotations

import pytest

from shared.errors import EnvelopeError
from shared.event import Event, new_binding_id
from shared.messages.bridge import BridgeStatus
from shared.messages.memory import MemorizeReport, RecallReport
from shared.messages.verbs import DelegateAnswer, VerbAck, VerbRequest
from shared.messages.voice import Notice, Reply, Speak, SpeechCompleted, Turn
from shared.subjects import speak_subject

BID = new_binding_id()


def test_payload_messages_build_events_of_their_own_type_stamped_by_the_sender() -> None:
    messages = [
        Speak("Hi.", "a1", "board"),
        Reply("x", spoken=False, kind="answer"),
        Notice("Home is unreachable.", BID),
        VerbAck("a1", "jmfts_write", ok=True, doc_id=3),
        DelegateAnswer("q?", "a1", "tui", ok=True, text="blue"),
        BridgeStatus("board", True),
        RecallReport("s", (), (), (), (), 0, 0.5, 1.0),
        MemorizeReport("e", "ok", "/m"),
    ]
    for message in messages:
        event = message.to_event(
            source="src", sequence_number=4, binding_id=BID, hops=("src",), produced_by_schema="s"
        )
        assert event.event_type == message.event_type
        assert type(message).is_type(event.event_type)
        assert (event.source, event.sequence_number, event.binding_id) == ("src", 4, BID)
        assert (event.hops, event.produced_by_schema) == (("src",), "s")
        assert type(message).recognise(Event.from_json(event.to_json())) == message


def test_a_verb_request_is_named_after_its_verb_and_an_ack_after_its_verb() -> None:
    request = VerbRequest("note", "a1", device="board")
    event = request.to_event("journal_append", source="s", sequence_number=1, binding_id=BID)
    assert event.event_type == "journal_append" and VerbRequest.is_verb(event.event_type)
    assert VerbRequest.from_event(event) == request
    assert VerbRequest.is_type("delegate") and not VerbRequest.is_type("journal_append")
    assert VerbAck.is_type("delegate.ack") and VerbAck.is_type("jmfts_write.ack")
    assert not VerbAck.is_type("speak.ack") and not VerbAck.is_type("delegate")


def test_a_speak_is_known_by_its_type_or_by_taus_subject_named_events() -> None:
    assert Speak.is_type("speak")
    assert Speak.is_type(speak_subject("a1", "board"))
    assert Speak.is_type("events.workspace.a1.out.speak")
    assert not Speak.is_type("reply") and not Speak.is_type("not a subject")


def test_recognise_refuses_another_type_naming_the_event_type() -> None:
    turn_ack = SpeechCompleted(BID, "board", ok=True).to_event(source="e", sequence_number=0)
    with pytest.raises(EnvelopeError) as info:
        Turn.recognise(turn_ack)
    assert info.value.key == "event_type"
    assert SpeechCompleted.recognise(turn_ack).ok
