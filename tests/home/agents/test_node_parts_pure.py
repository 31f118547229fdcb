"""The pure halves of the agent node's parts, each alone: the answer and report routes,
the output read, the delegated task read, the compaction verdict and the turn record."""

from __future__ import annotations

import json

import pytest

from home.agents.admission import PendingTurn
from home.agents.answers import ToAsker, ToDevice, route_answer, route_report
from home.agents.compaction import CompactionOutcome, compaction_verdict
from home.agents.conversation_book import turn_record
from home.agents.conversations import Entered
from home.agents.delegation import Delegated, delegated_task, operator_answer
from home.agents.output_watch import (
    DelegatedOut,
    RefusedToSpeak,
    Spoke,
    acked_binding,
    read_out,
    speech_ack_timeout,
)
from home.agents.sessions import DeviceSession
from home.tau_extensions.binding import TurnBinding
from home.tau_extensions.handset import DEFAULT_ACK_TIMEOUT_S
from shared.event import EnvelopeLimits, Event
from shared.messages.voice import Reply
from shared.schema.catalog import NodeCatalog

LIMITS = EnvelopeLimits()
OUT = "events.workspace.edge_asr.out"
TASK = Delegated(asker="edge_asr", question="what colour is the shed")


def turn(device: str | None = "kitchen", delegated: Delegated | None = None) -> PendingTurn:
    binding = TurnBinding("b1", device, "e1", 1, schema="voice")
    return PendingTurn("is the kettle on", binding, {}, 0.0, delegated=delegated)


def event(event_type: str, payload: dict[str, object], binding_id: str | None = "b1") -> bytes:
    made = Event.new(event_type, payload, source="agent.edge_asr", sequence_number=1,
                     binding_id=binding_id)  # fmt: skip
    return made.to_json(LIMITS)


# --- answers ----------------------------------------------------------------------


def test_an_answer_goes_stripped_on_the_devices_reply_rail() -> None:
    route = route_answer(turn(), "  it is  ", "edge_asr")
    assert route == ToDevice(
        f"{OUT}.reply.kitchen", Reply("it is", spoken=False, kind="answer", agent="edge_asr")
    )


@pytest.mark.parametrize("text", [None, "", "   ", 42])
def test_no_answer_or_no_device_publishes_nothing(text: object) -> None:
    assert route_answer(turn(), text, "edge_asr") is None
    assert route_answer(turn(device=None), "it is", "edge_asr") is None


def test_a_delegated_answer_goes_to_the_asker_and_a_blank_one_says_so() -> None:
    assert route_answer(turn(delegated=TASK), " green ", "ops") == ToAsker("green", None)
    assert route_answer(turn(delegated=TASK), None, "ops") == ToAsker("", "it gave no answer")


def test_a_report_goes_to_the_device_or_to_the_asker() -> None:
    route = route_report(turn(), "aborted", "too slow", "edge_asr")
    assert isinstance(route, ToDevice)
    assert route.reply == Reply("", spoken=False, kind="aborted", reason="too slow",
                                agent="edge_asr")  # fmt: skip
    assert route_report(turn(device=None), "failed", "x", "edge_asr") is None
    asked = route_report(turn(delegated=TASK), "failed", "τ died", "ops")
    assert asked == ToAsker("", "its turn failed: τ died")


# --- output watch -----------------------------------------------------------------


def test_a_speak_is_watched_under_its_binding() -> None:
    assert read_out(f"{OUT}.speak.kitchen", event("speak", {"text": "hi"}), LIMITS) == Spoke("b1")


def test_a_refusal_to_speak_is_read_with_its_reason_or_a_default() -> None:
    refusal = {"text": "", "spoken": False, "kind": "refusal", "reason": "a table"}
    seen = read_out(f"{OUT}.reply.kitchen", event("reply", refusal), LIMITS)
    assert seen == RefusedToSpeak("b1", "a table")
    bare = {"text": "", "spoken": False, "kind": "refusal"}
    seen = read_out(f"{OUT}.reply.kitchen", event("reply", bare), LIMITS)
    assert seen == RefusedToSpeak("b1", "it could not be spoken")


def test_a_delegate_verb_is_handed_on_and_other_verbs_are_not() -> None:
    raw = event("delegate", {"text": "ask", "device": "kitchen"})
    seen = read_out(f"{OUT}.delegate", raw, LIMITS)
    assert isinstance(seen, DelegatedOut) and seen.event.payload["text"] == "ask"
    assert read_out(f"{OUT}.journal_append", event("journal_append", {"text": "x"}), LIMITS) is None


@pytest.mark.parametrize(
    ("subject", "raw"),
    [
        (f"{OUT}.reply.kitchen", event("reply", {"text": "hi", "spoken": True, "kind": "status"})),
        (f"{OUT}.reply.kitchen", event("reply", {"kind": "refusal"}, binding_id=None)),
        (f"{OUT}.reply.kitchen", b"not json"),
        (f"{OUT}.x.y.z", event("speak", {"text": "hi"})),
        ("not a subject", event("speak", {"text": "hi"})),
        (f"{OUT}.reply.kitchen", json.dumps({"payload": []}).encode()),
    ],
)
def test_anything_else_on_the_out_rail_means_nothing(subject: str, raw: bytes) -> None:
    assert read_out(subject, raw, LIMITS) is None


def test_a_speech_ack_names_its_binding_by_its_last_token() -> None:
    assert acked_binding("events.action.speech.completed.b7") == "b7"
    assert acked_binding("events.action.speech.completed.") == ""


def test_the_speech_ack_timeout_is_the_handsets_or_its_default(catalog: NodeCatalog) -> None:
    spec = catalog["agent.edge_asr"]
    handset = next(ext for ext in spec.extensions if ext.name == "handset")
    assert speech_ack_timeout(spec) == float(
        handset.config.get("ack_timeout_s", DEFAULT_ACK_TIMEOUT_S)
    )


# --- delegation desk --------------------------------------------------------------


def test_a_delegated_task_is_read_off_the_agents_own_verb_event() -> None:
    made = Event.new("delegate", {"text": " ask it ", "device": "kitchen"}, source="a",
                     sequence_number=1, binding_id="b1", produced_by_schema="voice")  # fmt: skip
    pending = delegated_task(made)
    assert pending is not None
    assert (pending.binding_id, pending.device, pending.question, pending.schema) == (
        "b1", "kitchen", "ask it", "voice",
    )  # fmt: skip
    unbound = Event.new("delegate", {"text": "x"}, source="a", sequence_number=1)
    assert delegated_task(unbound) is None
    empty = Event.new("delegate", {"text": ""}, source="a", sequence_number=1, binding_id="b1")
    assert delegated_task(empty) is None


def test_the_operators_answer_is_ok_only_without_an_error() -> None:
    ok = operator_answer(TASK, "kitchen", "green", None, "ops")
    assert ok.ok and ok.text == "green" and ok.operator == "ops" and ok.asker == "edge_asr"
    none = operator_answer(TASK, None, "", "it gave no answer", "ops")
    assert not none.ok and none.error == "it gave no answer"


# --- compactor --------------------------------------------------------------------


def test_a_compaction_is_judged_by_its_outcome_then_by_the_context() -> None:
    assert compaction_verdict(900, 300, CompactionOutcome(performed=True)) == "performed"
    folded_by_tau = CompactionOutcome(performed=False)
    assert compaction_verdict(900, 300, folded_by_tau) == "tau_compacted"
    assert compaction_verdict(900, 900, folded_by_tau) == "unperformed"
    refused = CompactionOutcome(performed=False, error="τ refused")
    assert compaction_verdict(900, 950, refused) == "unperformed"


# --- conversation book ------------------------------------------------------------


def test_a_turn_is_logged_in_the_conversation_it_entered_and_only_there() -> None:
    session = DeviceSession(agent="edge_asr", device="kitchen", store="file", ref="r",
                            session_id="s1", created="2026-01-01T00:00:00+00:00")  # fmt: skip
    record = turn_record(Entered(session, True, False, 0.1), turn(), "at")
    assert record is not None
    assert (record.session_id, record.binding_id, record.device, record.text, record.at) == (
        "s1", "b1", "kitchen", "is the kettle on", "at",
    )  # fmt: skip
    assert turn_record(Entered(None, False, False, 0.0), turn(), "at") is None
