"""A device's conversation stays bounded: the node asks τ to compact it (real τ, the
scripted model, both stores).

The scripted model reports a 10-token prompt for every request, as the embedded
server does when it shows the model only the last turns, so τ never compacts on
its own; without the node the conversation would grow with every turn.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from home.agents.agent_node import AgentNode
from home.agents.compaction import CompactionOutcome, CompactionPolicy
from home.agents.compactor import Compactor
from home.agents.node_stats import NodeStats
from home.agents.protocol import WireEvent, parse_line
from home.agents.sessions import SessionStore
from home.llm.endpoint import ModelEndpoint
from shared.schema.catalog import NodeCatalog
from tests.home.agents.test_agent_node import speak_back, until
from tests.home.agents.test_sessions import (
    AGENT,
    conversation_text,
    request_for,
    said,
    store,
    turn,
    two_devices,
)
from tests.support.home_fixtures import REPO_ROOT
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

__all__ = ["store"]  # the fixture, shared with test_sessions

# τ keeps a quarter of this window verbatim; the node compacts at half of it.
WINDOW = 1024


def summarize_or_speak(request: RecordedRequest) -> Reply:
    """The summary names what the folded turns said; every other request is spoken back."""
    system = request.messages[0].get("content") if request.messages else ""
    if isinstance(system, str) and "context summarization assistant" in system:
        text = conversation_text(request)
        names = [name for name in ("Ada", "Bo") if said(text, name)]
        return Reply.say(f"GIST: the user gave the name {' and '.join(names) or 'nobody'}.")
    return speak_back(request)


def filler(i: int) -> str:
    return f"note {i}: " + " ".join(f"the {i} shelf holds jar {j} of plums" for j in range(12))


async def test_a_long_conversation_is_compacted_keeps_its_gist_and_resumes_compacted(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, store: SessionStore, tmp_path: Path
) -> None:
    model.responder = summarize_or_speak
    nc, kitchen, tui = await two_devices(nats_url)
    endpoint = ModelEndpoint(base_url=model.url, context_window=WINDOW, max_tokens=64)
    try:
        async with AgentNode(catalog[f"agent.{AGENT}"], nats_url=nats_url, data_dir=tmp_path,
                             model=endpoint, repo_root=REPO_ROOT,
                             sessions=store) as agent:  # fmt: skip
            await turn(kitchen, agent, "my name is Ada")
            await turn(tui, agent, "my name is Bo")
            for i in range(8):
                await turn(kitchen, agent, filler(i))
            await turn(kitchen, agent, "what is my name")
            compacted = agent.stats.compactions_asked
            pid = agent.tau_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            await until(lambda: agent.stats.restarts == 1 and agent.tau_pid != pid)
            await turn(kitchen, agent, "and again, what is my name")
            stats = agent.stats
    finally:
        await nc.close()

    asks = request_for(model, "what is my name")
    text = conversation_text(asks)
    users = [m for m in asks.messages if m.get("role") == "user"]
    # The earliest turns are folded into τ's summary: their gist stays, their words go.
    assert "GIST: the user gave the name Ada." in text, text
    assert "my name is Ada" not in text and "note 0:" not in text and not said(text, "Bo")
    assert len(users) < 8, [m.get("content") for m in users]
    assert compacted >= 1 and stats.compactions_unperformed == 0
    assert stats.compaction_failures == 0
    # The compaction is in the store: after τ is killed the conversation resumes folded.
    again = conversation_text(request_for(model, "and again, what is my name"))
    assert "GIST: the user gave the name Ada." in again and "my name is Ada" not in again
    summaries = [r for r in model.requests if "<conversation>" in conversation_text(r)]
    assert summaries and all(not said(conversation_text(r), "Bo") for r in summaries)


def test_the_policy_compacts_at_twice_what_tau_keeps_then_after_growth_of_half_that() -> None:
    policy = CompactionPolicy.for_endpoint(ModelEndpoint(base_url="x", context_window=WINDOW))
    assert (policy.keep_recent_tokens, policy.at_tokens) == (256, 512)
    assert not policy.due("a", 511) and policy.due("a", 512)
    policy.settled("a", 600)  # folded nothing at 600
    assert not policy.due("a", 727) and policy.due("a", 728) and policy.due("b", 512)
    policy.settled("a", 480)  # folded down to 480: the summary and the kept turns
    assert not policy.due("a", 607) and policy.due("a", 608)
    policy.settled("a", 100)
    assert not policy.due("a", 511) and policy.due("a", 512)


def test_compaction_end_is_read_as_an_event_with_its_outcome() -> None:
    line = (
        b'{"jsonrpc":"2.0","method":"compaction_end","params":{"compaction_id":"c",'
        b'"request_id":4,"is_error":false,"cancelled":false,"performed":true,'
        b'"tokens_before":900,"leaf":"9"}}'
    )
    event = parse_line(line)
    assert isinstance(event, WireEvent) and event.type == "compaction_end"
    assert CompactionOutcome.from_params(event.raw) == CompactionOutcome(True, None, 900)
    failed = {"is_error": True, "cancelled": False, "error": "model down"}
    assert CompactionOutcome.from_params(failed) == CompactionOutcome(False, "model down")
    aborted = {"is_error": False, "cancelled": True}
    assert CompactionOutcome.from_params(aborted) == CompactionOutcome(False, "cancelled")


def _side(kind: str, error: str | None = None) -> WireEvent:
    raw = {"purpose": "compaction", "reason": "threshold"}
    return WireEvent(type=kind, is_error=error is not None, error=error, raw=raw)


async def test_a_stop_waits_for_taus_own_compaction_and_names_one_it_cuts_short() -> None:
    stats = NodeStats()
    compactor = Compactor("agent", CompactionPolicy(256, 512), stats, wall_clock_s=30)
    # τ compacts by itself as a turn ends; the stop waits, and the compaction finishes.
    compactor.on_wire_event(_side("side_completion_start"))
    settled = asyncio.ensure_future(compactor.settle(5))
    await asyncio.sleep(0.05)
    assert not settled.done()
    compactor.on_wire_event(_side("side_completion_end"))
    await asyncio.wait_for(settled, 1)
    assert (stats.compactions, stats.compaction_failures, stats.compactions_cut_at_stop) == (
        1,
        0,
        0,
    )
    # One that outlasts the wait is cut by the stop: counted as cut, not as failed.
    compactor.on_wire_event(_side("side_completion_start"))
    await compactor.settle(0.05)
    compactor.on_wire_event(_side("side_completion_end", "CancelledError: "))
    assert (stats.compaction_failures, stats.compactions_cut_at_stop) == (0, 1)


def test_a_compaction_that_fails_while_the_node_runs_is_a_failure() -> None:
    stats = NodeStats()
    compactor = Compactor("agent", CompactionPolicy(256, 512), stats, wall_clock_s=30)
    compactor.on_wire_event(_side("side_completion_start"))
    compactor.on_wire_event(_side("side_completion_end", "model down"))
    assert (stats.compaction_failures, stats.compactions_cut_at_stop) == (1, 0)
