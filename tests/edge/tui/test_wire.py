"""The pure parts: wire shapes, the bridge.status reader, the conversation and status bar."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from edge.tui.conversation import Conversation, StatusLine
from edge.tui.link import LinkStatus
from edge.tui.wire import AgentReply, MemoryReport, TypedTurn, parse_incoming, speech_ack
from edge.wire import SpeakRequest
from shared.errors import EnvelopeError, SubjectError
from shared.event import Event, new_binding_id
from shared.messages.memory import memory_summary
from shared.subjects import device_rail_patterns, matches

BID = new_binding_id()


def event(event_type: str, payload: dict[str, Any], binding_id: str | None = BID) -> Event:
    return Event.new(event_type, payload, source="test", sequence_number=0, binding_id=binding_id)


def test_typed_turn_is_shaped_like_the_boards_turn() -> None:
    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    turn = TypedTurn("tui", BID, "hello", at)
    ev = Event.from_json(turn.to_event(source="edge.keyboard", sequence_number=4).to_json())
    assert turn.subject == "events.sensation.tui.turn"
    assert ev.event_type == "sensation.turn" and ev.binding_id == BID
    assert ev.payload["text"] == "hello" and ev.payload["device"] == "tui"
    assert ev.payload["endpoint"] == "keyboard" and ev.payload["words"] == []
    assert ev.timestamp == at and ev.sequence_number == 4


def test_speech_ack_names_the_binding_in_subject_and_envelope() -> None:
    ack = speech_ack(BID, "tui")
    ev = ack.to_event(source="edge.screen", sequence_number=0)
    assert ack.subject == f"events.action.speech.completed.{BID}"
    assert ev.binding_id == BID and ev.payload["ok"] is True and ev.payload["error"] is None


def test_device_rail_patterns_cover_every_agent_and_only_this_device() -> None:
    patterns = device_rail_patterns("tui")
    for rail in ("speak", "reply", "recall", "memorize"):
        assert any(matches(p, f"events.workspace.a1.out.{rail}.tui") for p in patterns)
        assert not any(matches(p, f"events.workspace.a1.out.{rail}.board") for p in patterns)
    with pytest.raises(SubjectError):
        device_rail_patterns("Bad Device")


def test_parse_each_rail() -> None:
    speech = parse_incoming("events.workspace.a1.out.speak.tui", event("speak", {"text": "Hi."}))
    assert speech == SpeakRequest("a1", "tui", BID, "Hi.", speech.event_id)
    reply = parse_incoming(
        "events.workspace.a1.out.reply.tui",
        event("reply", {"text": "x", "spoken": False, "reason": "code"}),
    )
    assert isinstance(reply, AgentReply) and not reply.spoken and reply.reason == "code"
    status = parse_incoming("events.workspace.a1.out.reply.tui", event("reply", {"text": "ok"}))
    assert isinstance(status, AgentReply) and status.spoken and status.reason is None
    note = parse_incoming(
        "events.workspace.a1.out.memorize.tui", event("memorize", {"text": "kept 2"})
    )
    assert isinstance(note, MemoryReport) and note.kind == "memorize" and note.summary == "kept 2"


@pytest.mark.parametrize(
    ("subject", "payload", "key"),
    [
        ("events.workspace.a1.out.speak.tui", {"text": "  "}, "payload.text"),
        ("events.workspace.a1.out.speak.tui", {}, "payload.text"),
        ("events.workspace.a1.out.reply.tui", {"text": "x", "spoken": "no"}, "payload.spoken"),
        ("events.workspace.a1.out.reply.tui", {"text": "x", "reason": 3}, "payload.reason"),
        ("events.workspace.a1.in", {"text": "x"}, "<subject>"),
    ],
)
def test_malformed_incoming_names_the_key(subject: str, payload: dict[str, Any], key: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        parse_incoming(subject, event("speak", payload))
    assert info.value.key == key


def test_memory_summary_forms() -> None:
    assert memory_summary("recall", {"query": "q", "hits": [1, 2, 3], "passed": 0}) == (
        "recall: query 'q', 0 of 3 passed"
    )
    assert memory_summary("recall", {"passed": 2}) == "recall: 2 passed"
    assert memory_summary("memorize", {"items": [{"id": 1}]}) == "memorize: 1 item(s)"
    assert memory_summary("recall", {"x": 1}) == 'recall: {"x":1}'
    long = memory_summary("recall", {"text": "word " * 100})
    assert len(long) == 160 and long.endswith("…")


@pytest.mark.parametrize(
    ("payload", "state", "detail", "rtt", "queued"),
    [
        ({"bridge": "tui", "state": "up", "rtt_ms": 2, "outbox": 0}, "up", "", 2.0, 0),
        (
            {"bridge": "tui", "state": "down", "detail": "link lost", "counters": {"rtt_ms": 9.5}},
            "down",
            "link lost",
            9.5,
            None,
        ),
        ({"bridge": "tui", "reachable": False, "reason": "refused"}, "down", "refused", None, None),
        ({"bridge": "tui", "reachable": True, "queued": 4}, "up", "", None, 4),
        (
            {"bridge": "tui", "state": "refused", "detail": "bad half"},
            "refused",
            "bad half",
            None,
            None,
        ),
    ],
)
def test_link_status_dialects(
    payload: dict[str, Any], state: str, detail: str, rtt: float | None, queued: int | None
) -> None:
    status = LinkStatus.from_event(event("bridge.status", payload, None))
    assert (status.state, status.detail, status.rtt_ms, status.queued) == (
        state,
        detail,
        rtt,
        queued,
    )
    assert status.up == (state == "up")


@pytest.mark.parametrize(
    ("event_type", "payload", "key"),
    [
        ("speak", {"bridge": "tui", "state": "up"}, "event_type"),
        ("bridge.status", {"state": "up"}, "payload.bridge"),
        ("bridge.status", {"bridge": "tui"}, "payload.state"),
        ("bridge.status", {"bridge": "tui", "state": "sideways"}, "payload.state"),
        ("bridge.status", {"bridge": "tui", "state": "up", "rtt_ms": "fast"}, "payload.rtt_ms"),
        ("bridge.status", {"bridge": "tui", "state": "up", "counters": []}, "payload.counters"),
        ("bridge.status", {"bridge": "tui", "state": "up", "detail": 1}, "payload.detail"),
    ],
)
def test_link_status_refusals_name_the_key(
    event_type: str, payload: dict[str, Any], key: str
) -> None:
    with pytest.raises(EnvelopeError) as info:
        LinkStatus.from_event(event(event_type, payload, None))
    assert info.value.key == key


def test_conversation_files_answers_by_binding_and_measures_latency() -> None:
    conv = Conversation()
    a, b = new_binding_id(), new_binding_id()
    conv.start_turn(a, "one", now=10.0)
    conv.start_turn(b, "two", now=11.0)
    conv.receive(SpeakRequest("x", "tui", b, "Two.", "e1"), now=11.5)
    conv.receive(AgentReply("y", "tui", a, "One.", False, "table", "e2"), now=13.0)
    conv.receive(MemoryReport("recall", "x", "tui", a, "recall: 1 passed", {}, "e3"), now=13.1)
    conv.receive(SpeakRequest("x", "tui", b, "Again.", "e4"), now=14.0)
    first, second = conv.turns
    assert first.latency_s == pytest.approx(3.0) and second.latency_s == pytest.approx(0.5)
    assert [n.summary for n in first.notes] == ["recall: 1 passed"]
    assert len(second.answers) == 2
    assert conv.active_agent == "x"
    assert conv.last_latency_s == pytest.approx(3.0)


def test_an_answer_for_an_unknown_binding_gets_its_own_turn() -> None:
    conv = Conversation()
    turn = conv.receive(SpeakRequest("x", "tui", None, "Unasked.", "e1"), now=1.0)
    assert turn.text is None and turn.latency_s is None and conv.turns == [turn]
    assert conv.last_latency_s is None


def test_status_line_direct_and_bridged() -> None:
    conv = Conversation()
    line = StatusLine("tui", "direct", nats_rtt_ms=0.42)
    assert line.render(conv) == (
        "tui │ link up (direct) │ rtt 0.4 ms │ queued 0 │ agent - │ last turn -"
    )
    line.nats_connected = False
    line.queued_local = 1
    assert "link DOWN (direct unreachable)" in line.render(conv)
    assert "queued 1" in line.render(conv) and not line.link_up

    line = StatusLine("tui", "bridge", nats_rtt_ms=0.1)
    line.bridge = LinkStatus("tui", "down", "timeout", rtt_ms=None, queued=3)
    conv.start_turn(BID, "hi", now=0.0)
    conv.receive(SpeakRequest("edge_asr", "tui", BID, "Hi.", "e"), now=1.25)
    text = line.render(conv)
    assert "link DOWN (bridge tui: timeout)" in text
    assert "rtt -" in text and "queued 3" in text
    assert "agent edge_asr" in text and "last turn 1.25 s" in text
    line.nats_connected = False
    assert "link DOWN (local NATS unreachable)" in line.render(conv)
