"""The messages of shared.messages: each round-trips through JSON, and each malformed
field is refused by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.bridge import BridgeStatus
from shared.messages.fields import words_and_rest
from shared.messages.memory import (
    Deposit,
    GateVerdict,
    MemorizeReport,
    RecallQuery,
    RecallReport,
    TurnMemory,
)
from shared.messages.verbs import VerbAck, VerbRequest, ack_failure
from shared.messages.voice import (
    Notice,
    Partial,
    Reply,
    Speak,
    SpeechCompleted,
    Turn,
    Utterance,
    WordTiming,
)
from tests.support.json_strategy import json_values

# Fixed, not new_binding_id(): it names parametrized cases, and parallel workers must
# collect the same names.
BID = "0123456789abcdef0123456789abcdef"
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def over_json(event: Event) -> Event:
    return Event.from_json(event.to_json())


def carrying(payload: dict[str, Any], event_type: str = "x", binding_id: str | None = BID) -> Event:
    return Event.new(event_type, payload, source="test", sequence_number=0, binding_id=binding_id)


def test_a_turn_round_trips() -> None:
    words = (WordTiming("hello", 0.0, 0.25, 0.9), WordTiming("there", 0.3, 0.5, 0.8))
    turn = Turn("board", BID, "hello there", 0.85, words, AT, AT + timedelta(seconds=1), "vad")
    assert Turn.from_event(over_json(turn.to_event(source="edge", sequence_number=1))) == turn


def test_the_other_voice_messages_round_trip() -> None:
    partial = Partial("board", BID, "hel")
    assert Partial.from_event(over_json(partial.to_event(source="e", sequence_number=0))) == partial
    ack = SpeechCompleted(BID, "board", ok=True, interrupted=True, duration_s=1.5)
    assert SpeechCompleted.from_event(over_json(ack.to_event(source="e", sequence_number=0))) == ack
    for speak in (Speak("Hi.", "a1", "board"), Speak("Hi."), Speak("Hi.", "a1", "board", True)):
        assert Speak.from_event(over_json(carrying(speak.to_payload()))) == speak
    assert "more" not in Speak("Hi.").to_payload()  # a whole answer's payload is as before
    for reply in (Reply("x"), Reply("", False, "aborted", "too slow", "a1")):
        assert Reply.from_event(over_json(carrying(reply.to_payload()))) == reply
    notice = Notice("Home is unreachable.", BID)
    assert Notice.from_event(over_json(carrying(notice.to_payload()))) == notice


def test_an_utterance_is_the_stripped_text_and_a_well_formed_device() -> None:
    assert Utterance.from_event(carrying({"text": " hi ", "device": "tui"})) == Utterance(
        "hi", "tui"
    )
    assert Utterance.from_event(carrying({"text": "hi", "device": "Not A Name"})).device is None


@pytest.mark.parametrize(
    ("parse", "payload", "binding_id", "key"),
    [
        (Turn.from_event, {"text": "hi", "device": "b"}, None, "binding_id"),
        (Turn.from_event, {"text": 3, "device": "b"}, BID, "payload.text"),
        (Turn.from_event, {"text": "hi"}, BID, "payload.device"),
        (
            Turn.from_event,
            {"text": "hi", "device": "b", "words": [{"word": 1}]},
            BID,
            "payload.words[0].word",
        ),
        (
            Turn.from_event,
            {"text": "hi", "device": "b", "words": [], "started_at": "noon"},
            BID,
            "payload.started_at",
        ),
        (
            Turn.from_event,
            {"text": "hi", "device": "b", "confidence": "x"},
            BID,
            "payload.confidence",
        ),
        (Partial.from_event, {"text": "h"}, BID, "payload.device"),
        (Utterance.from_event, {"text": "  "}, BID, "payload.text"),
        (Speak.from_event, {}, BID, "payload.text"),
        (Speak.from_event, {"text": "hi", "agent": 1}, BID, "payload.agent"),
        (Reply.from_event, {"text": "x", "spoken": "no"}, BID, "payload.spoken"),
        (Reply.from_event, {"text": "x", "reason": 3}, BID, "payload.reason"),
        (Reply.from_event, {"text": "x", "kind": []}, BID, "payload.kind"),
        (SpeechCompleted.from_event, {"ok": True}, None, "binding_id"),
        (SpeechCompleted.from_event, {"ok": "yes"}, BID, "payload.ok"),
        (SpeechCompleted.from_event, {"ok": True, "interrupted": 1}, BID, "payload.interrupted"),
        (SpeechCompleted.from_event, {"ok": True, "error": 2}, BID, "payload.error"),
        (SpeechCompleted.from_event, {"ok": True, "duration_s": "1"}, BID, "payload.duration_s"),
        (Notice.from_event, {"text": None}, BID, "payload.text"),
        (VerbRequest.from_event, {"text": ""}, BID, "payload.text"),
        (VerbRequest.from_event, {"text": "n", "device": 4}, BID, "payload.device"),
        (VerbAck.from_event, {"agent": "a", "verb": "v", "ok": None}, BID, "payload.ok"),
        (
            VerbAck.from_event,
            {"agent": "a", "verb": "v", "ok": True, "doc_id": "1"},
            BID,
            "payload.doc_id",
        ),
    ],
)
def test_voice_and_verb_refusals_name_the_field(
    parse: Any, payload: dict[str, Any], binding_id: str | None, key: str
) -> None:
    with pytest.raises(EnvelopeError) as info:
        parse(carrying(payload, binding_id=binding_id))
    assert info.value.key == key


def test_verb_messages_round_trip_and_acks_fail_in_every_dialect() -> None:
    for request in (VerbRequest("note", "a1", "T", "board"), VerbRequest("note")):
        assert VerbRequest.from_event(over_json(carrying(request.to_payload()))) == request
    for ack in (VerbAck("a1", "jmfts_write", True, doc_id=4), VerbAck("a1", "x", False, error="e")):
        back = VerbAck.from_event(over_json(carrying(ack.to_payload(), ack.event_type)))
        assert back == ack
        assert (ack_failure(ack.to_payload()) is None) == ack.ok
    assert ack_failure({"status": "refused"}) == "status='refused'"


def test_bridge_status_round_trips_in_full_and_reads_either_spelling() -> None:
    full = BridgeStatus(
        "board", False, "link lost", "down", "link lost", "edge", "board", "Cannot reach home.",
        rtt_ms=None, outbox=2, counters={"rtt_ms": 4.5}, changed=True,
    )  # fmt: skip
    back = BridgeStatus.from_event(over_json(full.to_event(source="b", sequence_number=0)))
    assert back == full
    assert (back.link_state, back.why, back.round_trip_ms, back.queued) == (
        "down",
        "link lost",
        4.5,
        2,
    )
    by_state = BridgeStatus.from_event(carrying({"bridge": "b", "state": "up"}, "bridge.status"))
    assert by_state.reachable and by_state.link_state == "up"
    by_flag = BridgeStatus.from_event(
        carrying({"bridge": "b", "reachable": False}, "bridge.status")
    )
    assert by_flag.link_state == "down" and by_flag.why == ""


@pytest.mark.parametrize(
    ("payload", "key"),
    [
        ({"reachable": True}, "payload.bridge"),
        ({"bridge": "b"}, "payload.state"),
        ({"bridge": "b", "state": "sideways"}, "payload.state"),
        ({"bridge": "b", "reachable": "no"}, "payload.reachable"),
        ({"bridge": "b", "state": "up", "reason": 1}, "payload.reason"),
        ({"bridge": "b", "state": "up", "side": 1}, "payload.side"),
        ({"bridge": "b", "state": "up", "rtt_ms": "fast"}, "payload.rtt_ms"),
        ({"bridge": "b", "state": "up", "outbox": True}, "payload.outbox"),
        ({"bridge": "b", "state": "up", "counters": []}, "payload.counters"),
        ({"bridge": "b", "state": "up", "counters": {"rtt_ms": "x"}}, "payload.counters.rtt_ms"),
        ({"bridge": "b", "state": "up", "changed": "yes"}, "payload.changed"),
    ],
)
def test_bridge_status_refusals_name_the_field(payload: dict[str, Any], key: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        BridgeStatus.from_event(carrying(payload, "bridge.status"))
    assert info.value.key == key


def recall() -> RecallReport:
    return RecallReport(
        search_id="s1",
        queries=(RecallQuery("workspace/a1", "tea"),),
        scores=(0.9, 0.2),
        document_ids=(4, 7),
        injected_ids=(4,),
        passed=1,
        threshold=0.5,
        latency_ms=12.5,
        errors=("journal/a1: timeout",),
        failed_roots=("journal/a1",),
        agent="a1",
    )


def memorize() -> MemorizeReport:
    return MemorizeReport(
        evaluation_id="e1",
        status="deposited",
        memory_root="memory/a1",
        queries=("likes tea", "lives in Oslo", "has a cat"),
        scores=(None, 0.8, 0.99),
        document_ids=(10, 11, 3),
        deposits=(Deposit(10, "created"), Deposit(11, "superseded", 2), Deposit(3, "reinforced")),
        skipped=1,
        gate=(GateVerdict(True, 0.9), GateVerdict(False, 0.1)),
        answer="FACT likes tea",
        elapsed_ms=80.0,
        agent="a1",
    )


def test_memory_reports_round_trip_and_name_their_memories() -> None:
    assert RecallReport.from_event(over_json(carrying(recall().to_payload()))) == recall()
    report = MemorizeReport.from_event(over_json(carrying(memorize().to_payload())))
    assert report == memorize()
    assert report.memories() == [
        TurnMemory(10, "created", "likes tea", None),
        TurnMemory(11, "superseded", "lives in Oslo", 2),
    ]


@pytest.mark.parametrize(
    ("parse", "change", "key"),
    [
        (RecallReport.from_event, {"search_id": 1}, "payload.search_id"),
        (RecallReport.from_event, {"queries": [{"root": "r"}]}, "payload.queries[0].query"),
        (RecallReport.from_event, {"scores": [0.1, None]}, "payload.scores[1]"),
        (RecallReport.from_event, {"document_ids": [1.5]}, "payload.document_ids[0]"),
        (RecallReport.from_event, {"passed": None}, "payload.passed"),
        (RecallReport.from_event, {"errors": "boom"}, "payload.errors"),
        (MemorizeReport.from_event, {"status": None}, "payload.status"),
        (MemorizeReport.from_event, {"deposits": [{"id": "x"}]}, "payload.deposits[0].id"),
        (
            MemorizeReport.from_event,
            {"deposits": [{"id": 1, "action": "created", "supersedes": "2"}]},
            "payload.deposits[0].supersedes",
        ),
        (MemorizeReport.from_event, {"gate": [{"keep": 1}]}, "payload.gate[0].keep"),
        (MemorizeReport.from_event, {"queries": [1]}, "payload.queries[0]"),
        (MemorizeReport.from_event, {"elapsed_ms": "slow"}, "payload.elapsed_ms"),
    ],
)
def test_memory_report_refusals_name_the_field(
    parse: Any, change: dict[str, Any], key: str
) -> None:
    base = (recall() if parse == RecallReport.from_event else memorize()).to_payload()
    with pytest.raises(EnvelopeError) as info:
        parse(carrying({**base, **change}))
    assert info.value.key == key


def test_words_and_rest_split_any_payload() -> None:
    assert words_and_rest({"text": "hi", "a": 1}) == ("hi", {"a": 1})
    assert words_and_rest({"text": 3}) == (None, {})


PARSERS = (
    Turn.from_event,
    Partial.from_event,
    Utterance.from_event,
    Speak.from_event,
    Reply.from_event,
    SpeechCompleted.from_event,
    Notice.from_event,
    BridgeStatus.from_event,
    RecallReport.from_event,
    MemorizeReport.from_event,
    VerbRequest.from_event,
    VerbAck.from_event,
)


@given(
    payload=st.dictionaries(st.text(max_size=12), json_values(), max_size=6)
    | st.fixed_dictionaries(
        {},
        optional={
            "text": json_values(),
            "bridge": json_values(),
            "state": st.sampled_from(["up", "down", "x"]) | json_values(),
            "reachable": json_values(),
            "ok": json_values(),
            "device": json_values(),
            "words": json_values(),
            "deposits": json_values(),
            "queries": json_values(),
            "counters": json_values(),
        },
    ),
    binding=st.none() | st.just(BID),
)
def test_any_payload_parses_or_is_refused_by_name(
    payload: dict[str, Any], binding: str | None
) -> None:
    """A parser either returns its message or raises EnvelopeError naming a field; and
    what parses, re-sent, parses to the same message."""
    for event_type in ("bridge.status",):
        event = carrying(payload, event_type, binding)
        for parse in PARSERS:
            try:
                message = parse(event)
            except EnvelopeError as exc:
                assert exc.key == "binding_id" or exc.key.startswith("payload.")
                continue
            if hasattr(message, "to_payload"):
                again = carrying(message.to_payload(), event_type, binding)
                assert parse(over_json(again)) == message


@pytest.mark.parametrize(
    ("payload", "failed"),
    [
        ({"doc_id": 4}, False),
        ({"ok": True}, False),
        ({"ok": False, "error": "denied"}, True),
        ({"error": "disk full"}, True),
        ({"status": "ok"}, False),
        ({"status": "refused"}, True),
    ],
)
def test_ack_failure_reads_both_dialects(payload: dict[str, object], failed: bool) -> None:
    assert (ack_failure(payload) is not None) == failed
