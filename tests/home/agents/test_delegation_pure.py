"""Delegation's pure parts: the pending table, the prompts, the inbound parse, the answer."""

from __future__ import annotations

import pytest

from home.agents.delegation import (
    Delegated,
    Pending,
    PendingDelegations,
    answer_prompt,
    delegation_ack,
    memory_refusal,
    timed_out,
)
from home.agents.errors import InboundError
from home.agents.inbound import parse_inbound
from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.verbs import DelegateAnswer, VerbAck, VerbRequest, ack_failure

TASK = Pending("b1", "kitchen", "what do you remember about the blue shed", "edge_asr")


def event(event_type: str, payload: dict[str, object], source: str = "agent.edge_asr") -> Event:
    return Event.new(event_type, payload, source=source, sequence_number=1, binding_id="b1")


@pytest.mark.parametrize("ack_first", [False, True])
def test_a_taken_task_is_timed_once_whichever_comes_first(ack_first: bool) -> None:
    table = PendingDelegations()
    if ack_first:
        assert table.acked("b1", ok=True) is None  # the task itself not seen yet
        assert table.asked(TASK) == TASK
    else:
        assert table.asked(TASK) is None  # not taken yet
        assert table.acked("b1", ok=True) == TASK
    assert table.due("b1") == TASK
    assert table.due("b1") is None


def test_an_answered_or_refused_or_unacked_task_is_never_due() -> None:
    table = PendingDelegations()
    table.asked(TASK)
    table.acked("b1", ok=True)
    table.answered("b1")
    assert table.due("b1") is None
    table.asked(TASK)
    assert table.acked("b1", ok=False) is None
    assert table.due("b1") is None
    table.asked(TASK)  # the ack never came: the tool already told the model so
    assert table.due("b1") is None


def test_the_table_is_bounded() -> None:
    table = PendingDelegations(limit=2)
    for n in range(5):
        table.asked(Pending(f"b{n}", None, "q", None))
    assert len(table) == 2


def test_an_operator_that_reads_memory_refuses_without_it() -> None:
    reads = [("agent", "jmfts_url", "jmfts_token_file"), ("agent", "nats_url")]
    assert "no memory" in (memory_refusal(reads, has_memory=False) or "")
    assert memory_refusal(reads, has_memory=True) is None
    assert memory_refusal([("agent", "nats_url")], has_memory=False) is None


def test_the_ack_is_a_verb_ack_naming_the_asker_and_why() -> None:
    asked = Delegated("edge_asr", "q")
    taken = delegation_ack(asked, "b1", None, source="agent.jmfts_operator", seq=1, schema="s")
    refused = delegation_ack(asked, "b1", "busy", source="agent.jmfts_operator", seq=2, schema=None)
    assert VerbAck.from_event(taken) == VerbAck("edge_asr", "delegate", ok=True)
    assert (taken.event_type, taken.binding_id, taken.produced_by_schema) == (
        "delegate.ack",
        "b1",
        "s",
    )
    assert ack_failure(taken.payload) is None
    assert ack_failure(refused.payload) == "ok=false: busy"


def test_the_prompts_say_what_happened_and_what_to_do() -> None:
    found = DelegateAnswer("q?", "edge_asr", "tui", ok=True, text=" It is blue. ")
    prompt = answer_prompt(found)
    assert 'You asked the operator: "q?".' in prompt and "Its answer: It is blue.\n" in prompt
    late = answer_prompt(timed_out(TASK, 2, "edge_asr"))
    assert "It has no answer: the operator did not answer within 2 seconds." in late
    assert "could not find out" in late


def test_a_delegated_task_is_prompted_with_its_question_and_remembers_its_asker() -> None:
    raw = event(
        "delegate", VerbRequest(" is it blue ", agent="edge_asr", device="tui").to_payload()
    )
    inbound = parse_inbound(raw.to_json())
    assert (inbound.text, inbound.device, inbound.from_user) == ("is it blue", "tui", False)
    assert inbound.delegated == Delegated("edge_asr", "is it blue")


def test_an_answer_coming_back_is_prompted_for_the_device_that_asked() -> None:
    answer = DelegateAnswer("q?", "edge_asr", "kitchen", ok=False, error="its turn failed")
    inbound = parse_inbound(event("delegate.answer", answer.to_payload()).to_json())
    assert inbound.device == "kitchen" and inbound.binding_id == "b1"
    assert inbound.answer == answer and not inbound.from_user
    assert "its turn failed" in inbound.text


@pytest.mark.parametrize(
    ("payload", "key"),
    [
        ({"question": "q", "asker": "a", "device": None, "ok": True, "text": " "}, "payload.text"),
        ({"question": "q", "asker": "a", "ok": "yes"}, "payload.ok"),
        ({"asker": "a", "ok": False}, "payload.question"),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_key(payload: dict[str, object], key: str) -> None:
    with pytest.raises(EnvelopeError, match=key.replace(".", r"\.")):
        DelegateAnswer.from_event(event("delegate.answer", payload))
    with pytest.raises(InboundError, match="payload"):
        parse_inbound(event("delegate.answer", payload).to_json())


def test_a_task_from_an_unnameable_asker_is_refused() -> None:
    raw = event("delegate", {"text": "q", "agent": "Not A Name", "device": "tui"})
    with pytest.raises(InboundError, match="asker"):
        parse_inbound(raw.to_json())
