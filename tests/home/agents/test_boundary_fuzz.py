"""Fuzzing the agent node's outside input: its inbound rail, its own ``out.>``, the
speech acks it watches and the history requests it answers.

Any local client can publish on all four. Whatever arrives, the node either
queues a turn or counts the message under a named reason (invalid, stale,
duplicate); nothing escapes a handler, nothing lands in ``internal_errors``, and
a good utterance sent after the fuzzed ones is still queued. No τ runs: the
handlers are driven directly, as NATS would call them. The slowest case is
reported (tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from home.agents.admission import Admission
from home.agents.agent_node import AgentNode
from home.llm.endpoint import ModelEndpoint
from shared.event import Event
from shared.messages.history import HistoryReply, HistoryRequest, history_subject
from shared.schema.catalog import NodeCatalog
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report
from tests.support.home_fixtures import REPO_ROOT

IN = "events.workspace.edge_asr.in"
INBOX = Slowest("agent inbox")
OWN_OUT = Slowest("agent out rail")
HISTORY = Slowest("agent history requests")


@dataclass
class Msg:
    """What a NATS callback reads of a core message (no reply: nothing to settle)."""

    subject: str
    data: bytes
    reply: str = ""


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(INBOX, OWN_OUT, HISTORY)


@pytest.fixture(scope="module")
def node(catalog: NodeCatalog, tmp_path_factory: pytest.TempPathFactory) -> AgentNode:
    """An agent node never started: its handlers run, no τ and no NATS behind them."""
    return AgentNode(
        catalog["agent.edge_asr"],
        nats_url="nats://127.0.0.1:1",
        data_dir=tmp_path_factory.mktemp("agent"),
        model=ModelEndpoint(base_url="http://127.0.0.1:1/v1"),
        repo_root=REPO_ROOT,
    )


def _turn(text: str = "is the kettle on", **changes: Any) -> dict[str, Any]:
    event = Event.new(
        "sensation.turn", {"text": text, "device": "tui"}, source="edge.audio.tui",
        sequence_number=1, binding_id="b1",
    )  # fmt: skip
    return event.to_dict() | changes


json_values = json_strategy.json_values()
GOOD = _turn()
# One id for every fuzzed event, so duplicates are fuzzed too.
FUZZ_ID = "6f1c1a4e-0000-4000-8000-000000000001"
POISONED = [
    b'{"payload": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    json.dumps(_turn(ttl_ms=10**17)).encode(),
    json.dumps(_turn(timestamp="9999-12-31T23:59:59+00:00")).encode(),
    json.dumps(_turn(text="x" * 100_000)).encode(),
    b"\xff\xfe",
    b"",
]
messages = (
    st.dictionaries(st.sampled_from([*GOOD, "x"]), json_values, max_size=6).map(
        lambda changes: json.dumps(GOOD | {"event_id": FUZZ_ID} | changes).encode()
    )
    | st.dictionaries(st.sampled_from(["text", "device", "subject"]), json_values, max_size=3).map(
        lambda payload: json.dumps(GOOD | {"event_id": FUZZ_ID, "payload": payload}).encode()
    )
    | st.binary(max_size=200)
    | st.sampled_from(POISONED)
)


def _counted(node: AgentNode) -> int:
    stats = node.stats
    return stats.invalid + stats.stale + stats.duplicates + node.queued


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(messages, min_size=1, max_size=4))
async def test_every_inbound_message_is_queued_or_counted_and_the_next_good_one_queued(
    node: AgentNode, batch: list[bytes]
) -> None:
    node._admission = Admission()
    before = node.stats.received
    for raw in batch:
        with INBOX.timed(raw):
            await node._on_inbound(Msg(IN, raw))  # type: ignore[arg-type]
    good = json.dumps(_turn("and now a real question")).encode()
    queued = node.queued
    await node._on_inbound(Msg(IN, good))  # type: ignore[arg-type]
    assert node.queued == queued + 1, "the next good utterance was not queued"
    assert node.stats.received - before == len(batch) + 1
    assert _counted(node) >= node.queued
    assert node.stats.internal_errors == 0


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(
        [
            "events.workspace.edge_asr.out.reply.tui",
            "events.workspace.edge_asr.out.speak.tui",
            "events.workspace.edge_asr.out.speak",
            "events.workspace.edge_asr.out.reply",
            "events.workspace.edge_asr.out.x.y.z",
            "events.action.speech.completed.b1",
            "events.action.speech.completed.",
        ]
    ),
    messages
    | st.dictionaries(st.sampled_from(["kind", "reason", "text"]), json_values, max_size=3).map(
        lambda payload: json.dumps(_turn() | {"payload": payload}).encode()
    ),
)
async def test_anything_on_the_nodes_own_rails_is_read_or_ignored_never_raised(
    node: AgentNode, subject: str, raw: bytes
) -> None:
    handler = node._on_speech_completed if ".speech.completed." in subject else node._on_out
    with OWN_OUT.timed((subject, raw)):
        await handler(Msg(subject, raw))  # type: ignore[arg-type]
    assert node.stats.internal_errors == 0


async def test_a_bug_met_by_inbound_input_is_counted_logged_and_survived(
    node: AgentNode, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("a bug in parsing")

    monkeypatch.setattr("home.agents.agent_node.parse_inbound", broken)
    errors = node.stats.internal_errors
    await node._on_inbound(Msg(IN, json.dumps(GOOD).encode()))  # type: ignore[arg-type]
    assert node.stats.internal_errors == errors + 1
    (line,) = [r.getMessage() for r in caplog.records if "inbound handler failed" in r.getMessage()]
    assert "a bug in parsing" in line and IN in line


@dataclass
class Request:
    """A core message with a reply subject: what the node answers is kept."""

    subject: str
    data: bytes
    reply: str = "_INBOX.fuzz"
    answers: list[bytes] = field(default_factory=list)

    async def respond(self, data: bytes) -> None:
        self.answers.append(data)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(st.sampled_from(["device", "turns", "x"]), json_values, max_size=3).map(
        lambda body: json.dumps(body).encode()
    )
    | st.binary(max_size=200)
    | st.sampled_from(POISONED)
)
# Found when this suite was written: nesting too deep for json, and a request read whole
# however long it was (now refused unread past 1 KiB).
@example(POISONED[0])
@example(POISONED[3])
async def test_every_history_request_gets_one_readable_answer_and_the_next_good_one_too(
    node: AgentNode, raw: bytes
) -> None:
    errors = node.stats.internal_errors
    fuzzed = Request(history_subject("edge_asr"), raw)
    with HISTORY.timed(raw):
        await node._on_history(fuzzed)  # type: ignore[arg-type]
    good = Request(history_subject("edge_asr"), HistoryRequest("hall").to_json())
    await node._on_history(good)  # type: ignore[arg-type]
    assert len(fuzzed.answers) == 1
    HistoryReply.from_json(fuzzed.answers[0])
    assert HistoryReply.from_json(good.answers[0]).error == "hall has no conversation yet"
    assert node.stats.internal_errors == errors


def test_the_fixture_node_is_never_started(node: AgentNode) -> None:
    assert node.tau_pid is None
    assert isinstance(node.run_dir, Path)
