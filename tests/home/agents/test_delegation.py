"""Delegation end to end at the node level: two real τ agents, the real router, real JMFTS.

The asker (``agent.edge_asr``) delegates; the router takes the task to the operator
(``agent.jmfts_operator``) and its answer back, through the shipped schema's bindings;
the scripted model plays both agents (tests/support/delegation.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import nats
import pytest

from home.agents.agent_node import AgentNode
from home.jmfts.testing import RunningJmfts
from home.llm.endpoint import ModelEndpoint
from home.substrate.config import EventLogConfig
from home.substrate.router import Router
from home.substrate.routing import Route
from shared.schema import load_activation_schema
from shared.schema.catalog import NodeCatalog, NodeSpec
from shared.subjects import workspace_in_subject
from tests.home.agents.test_agent_node import until, with_extension_config
from tests.support.delegation import FACT, FINDING_OUT, QUESTION, delegation_responder
from tests.support.home_fixtures import REPO_ROOT, EdgeSide, event_log_server
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel, content_text


@dataclass
class Pair:
    """The asking agent's node and the operator's."""

    asker: AgentNode
    operator: AgentNode


@pytest.fixture
async def nats_url(tmp_path: Path) -> AsyncIterator[str]:
    """A bus with the event log, as home runs it: the router reads the bindings from it."""
    async with event_log_server(tmp_path / "bus") as url:
        yield url


@asynccontextmanager
async def routed(nats_url: str, schema: str) -> AsyncIterator[Router]:
    """The substrate's router with ``schema``'s bindings (each into its node's inbox)."""
    loaded = load_activation_schema(REPO_ROOT / "schemas" / "activation" / f"{schema}.yaml")
    nc = await nats.connect(nats_url)
    router = Router(nc, "substrate.router", log_nc=nc, stream=EventLogConfig().stream)
    try:
        await router.start()
        routes = [
            Route(schema, b.from_, b.to, workspace_in_subject(b.to.removeprefix("agent.")))
            for b in loaded.bindings
            if b.to.startswith("agent.")
        ]
        await router.add_routes(schema, routes)
        yield router
    finally:
        await router.close()
        await nc.drain()


@asynccontextmanager
async def delegating_pair(
    asker: NodeSpec,
    operator: NodeSpec,
    nats_url: str,
    model: ScriptedModel,
    tmp_path: Path,
    jmfts: RunningJmfts | None,
) -> AsyncIterator[Pair]:
    """Both nodes and the router; the operator reads the asker's memory when JMFTS runs."""
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(routed(nats_url, "edge_asr"))
        memory: dict[str, Any] = {}
        if jmfts is not None:
            token = await jmfts.principal(
                "jmfts_operator",
                ["journal/jmfts_operator", "workspace/jmfts_operator"],
                read=operator.memory_reads,
            )
            token_file = tmp_path / "tokens" / "jmfts_operator.token"
            token_file.parent.mkdir()
            token_file.write_text(token)
            memory = {"jmfts_url": jmfts.url, "jmfts_token_file": token_file}
        nodes = [
            await stack.enter_async_context(
                AgentNode(
                    spec, nats_url=nats_url, data_dir=tmp_path / "data",
                    model=ModelEndpoint(base_url=model.url), repo_root=REPO_ROOT,
                    **(memory if spec is operator else {}),
                )
            )
            for spec in (asker, operator)
        ]  # fmt: skip
        yield Pair(*nodes)


async def test_a_delegated_question_is_searched_in_memory_and_its_answer_spoken(
    catalog: NodeCatalog,
    nats_url: str,
    model: ScriptedModel,
    edge: EdgeSide,
    tmp_path: Path,
    jmfts: RunningJmfts,
) -> None:
    await jmfts.write("workspace/edge_asr", FACT)
    await jmfts.write("workspace/elsewhere", "The red shed is empty.")  # not granted: unseen
    # A conversation's own turn, granted and closer to the question than the fact: a
    # search for what is remembered leaves it out.
    asked = "user — 3: what do you remember about the blue shed, the blue shed?"
    await jmfts.write("journal/edge_asr/sessions", asked, usetype="tau:message")
    model.responder = delegation_responder
    async with delegating_pair(
        catalog["agent.edge_asr"], catalog["agent.jmfts_operator"], nats_url, model, tmp_path,
        jmfts,
    ) as pair:  # fmt: skip
        said = await edge.say(QUESTION, received=lambda: pair.asker.stats.received)
        speaks = await edge.wait_for("speak.tui", 2, timeout_s=90)
        await until(lambda: len(pair.asker.stats.outcomes) == 2)

    assert [s.event.payload["text"] for s in speaks] == [FINDING_OUT, f"I remember this: {FACT}"]
    assert {s.event.binding_id for s in speaks} == {said.binding_id}
    (ack,) = [e for e in edge.seen if e.subject == f"events.journal.delegate.{said.binding_id}"]
    assert ack.event.payload == {"agent": "edge_asr", "verb": "delegate", "ok": True, "error": None}
    (search,) = [
        e for e in edge.seen if e.subject == "events.workspace.jmfts_operator.out.recall.tui"
    ]
    assert search.event.binding_id == said.binding_id
    assert search.event.payload["queries"] == [{"root": "*", "query": "blue shed"}]
    operator_requests = [r for r in model.requests if "memory_search" in r.tool_names]
    hits = content_text(operator_requests[-1].messages[-1].get("content"))
    assert FACT in hits and "red shed" not in hits, hits
    assert "remember about the blue shed" not in hits, hits
    (answer,) = [e for e in edge.seen if e.subject.endswith(".out.answer.edge_asr")]
    assert answer.event.payload["ok"] is True
    assert answer.event.payload["question"] == QUESTION
    assert answer.event.binding_id == said.binding_id
    delegate_result = [
        content_text(m.get("content"))
        for r in model.requests
        for m in r.messages
        if m.get("role") == "tool" and "operator" in content_text(m.get("content"))
    ]
    assert "if it has none within 120 seconds, you will be told so" in delegate_result[0]
    assert pair.operator.stats.completed == 1
    assert pair.asker.stats.delegations_timed_out == 0


async def test_an_operator_without_memory_refuses_and_the_asker_says_why(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.responder = delegation_responder
    async with delegating_pair(
        catalog["agent.edge_asr"], catalog["agent.jmfts_operator"], nats_url, model, tmp_path,
        None,
    ) as pair:  # fmt: skip
        said = await edge.say(QUESTION, received=lambda: pair.asker.stats.received)
        (speak,) = await edge.wait_for("speak.tui", 1, timeout_s=60)
        await until(lambda: len(pair.asker.stats.outcomes) == 1)
        await asyncio.sleep(0.5)  # room for a wrong answer turn to show up

    text = speak.event.payload["text"]
    assert text.startswith("I could not ask: delegate: refused"), text
    assert "it has no memory to search in this run" in text
    (ack,) = [e for e in edge.seen if e.subject == f"events.journal.delegate.{said.binding_id}"]
    assert ack.event.payload["ok"] is False
    assert pair.operator.stats.delegations_refused == 1
    assert pair.operator.stats.prompts == 0
    assert not any("memory_search" in r.tool_names for r in model.requests)
    assert len(edge.on("speak")) == 1


async def test_an_operator_that_never_answers_is_told_to_the_asker_who_says_so(
    catalog: NodeCatalog,
    nats_url: str,
    model: ScriptedModel,
    edge: EdgeSide,
    tmp_path: Path,
    jmfts: RunningJmfts,
) -> None:
    gate = asyncio.Event()

    def hang_the_operator(request: RecordedRequest) -> Reply:
        reply = delegation_responder(request)
        return replace(reply, gate=gate) if "memory_search" in request.tool_names else reply

    model.responder = hang_the_operator
    asker = with_extension_config(catalog["agent.edge_asr"], "verbs", delegate_timeout_s=2)
    try:
        async with delegating_pair(
            asker, catalog["agent.jmfts_operator"], nats_url, model, tmp_path, jmfts
        ) as pair:
            said = await edge.say(QUESTION, received=lambda: pair.asker.stats.received)
            speaks = await edge.wait_for("speak.tui", 2, timeout_s=60)
            await until(lambda: len(pair.asker.stats.outcomes) == 2)
            gate.set()
    finally:
        gate.set()

    assert [s.event.payload["text"] for s in speaks] == [
        FINDING_OUT,
        "Sorry, I could not find out: the operator did not answer within 2 seconds.",
    ]
    assert {s.event.binding_id for s in speaks} == {said.binding_id}
    told = [e for e in edge.seen if e.subject == "events.workspace.edge_asr.in"
            and e.event.event_type == "delegate.answer"]  # fmt: skip
    # The asker's node told it (the operator's own answer came late, once the gate opened).
    assert told[0].event.source == "agent.edge_asr"
    assert told[0].event.payload["ok"] is False
    assert told[0].event.binding_id == said.binding_id
    assert pair.asker.stats.delegations_timed_out == 1
