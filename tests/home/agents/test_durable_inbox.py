"""The agent's inbound rail through its durable consumer on home's event log.

A real nats-server with JetStream and the event-log stream (as `home up` runs it),
real τ, the scripted model: what is routed while no node runs is answered by the
next one, a turn abandoned mid-flight is redelivered to the next life, and a stale
or malformed utterance is settled for good rather than answered or redelivered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from home.agents import inbox
from home.agents.agent_node import AgentNode
from home.agents.errors import InboxMissing
from home.llm.endpoint import ModelEndpoint
from home.substrate.agent_inboxes import AgentInboxes
from home.substrate.config import EventLogConfig
from home.substrate.eventlog import ensure_stream
from shared.event import Event
from shared.nats_confirm import confirm_subscriptions
from shared.schema.catalog import NodeCatalog, NodeSpec
from shared.subjects import agent_inbox_durable, workspace_in_subject
from tests.support.home_fixtures import REPO_ROOT, EdgeSide, event_log_server
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

AGENT = "edge_asr"


@pytest.fixture
async def event_log(tmp_path: Path) -> AsyncIterator[str]:
    """A JetStream nats-server with home's event-log stream; yields its URL."""
    async with event_log_server(tmp_path) as url:
        yield url


@pytest.fixture
async def edge_side(event_log: str) -> AsyncIterator[EdgeSide]:
    nc = await nats.connect(event_log)
    side = EdgeSide(nc=nc, agent=AGENT)
    await nc.subscribe("events.>", cb=side.on_event)
    await confirm_subscriptions(nc)
    try:
        yield side
    finally:
        await nc.drain()


def node(spec: NodeSpec, url: str, model: ScriptedModel, data_dir: Path) -> AgentNode:
    return AgentNode(
        spec, nats_url=url, data_dir=data_dir, model=ModelEndpoint(base_url=model.url),
        repo_root=REPO_ROOT,
    )  # fmt: skip


def speak_back(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": f"You said {request.last_user_text}."})


async def test_an_utterance_routed_while_no_node_runs_is_answered_by_the_next(
    catalog: NodeCatalog, event_log: str, edge_side: EdgeSide, tmp_path: Path
) -> None:
    async with ScriptedModel(responder=speak_back) as model:
        # The first life reads the durable consumer the substrate made, then goes away.
        async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as first:
            assert first._inbox is not None and first._inbox.durable
        said = await edge_side.say("is anyone there")
        async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as second:
            (speak,) = await edge_side.wait_for("speak.tui")
        assert speak.event.binding_id == said.binding_id
        assert speak.event.payload["text"] == "You said is anyone there."
        assert second.stats.received == 1


async def test_a_turn_abandoned_mid_flight_is_redelivered_to_the_next_life(
    catalog: NodeCatalog,
    event_log: str,
    edge_side: EdgeSide,
    tmp_path: Path,
) -> None:
    # The substrate's consumer, made again with a short ack wait (it replaces one whose
    # settings differ).
    await AgentInboxes(EventLogConfig().stream, ack_wait_s=2.0).prepare(edge_side.nc, AGENT)
    gate = asyncio.Event()
    held: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        if not held:  # the first life's model call never returns
            held.append(request)
            return Reply.call("speak", {"text": "too late"}, gate=gate)
        return speak_back(request)

    async with ScriptedModel(responder=answer) as model:
        first = node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path)
        async with first:
            said = await edge_side.say("what time is it")
            await model.wait_requests(1)
            # Gone mid-turn, as after kill -9: no ack, no hand-back of the turn in flight.
            await first.close(grace_s=0)
        async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as second:
            (speak,) = await edge_side.wait_for("speak.tui", timeout_s=60)
        gate.set()
    assert speak.event.binding_id == said.binding_id
    assert speak.event.payload["text"] == "You said what time is it."
    assert second.stats.received == 1


async def test_a_stale_utterance_is_refused_and_not_redelivered(
    catalog: NodeCatalog, event_log: str, edge_side: EdgeSide, tmp_path: Path
) -> None:
    async with ScriptedModel(responder=speak_back) as model:
        async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as first:
            old = Event.new(
                "sensation.turn", {"text": "hello from the past", "device": "tui"},
                source="edge.audio.tui", sequence_number=1, ttl_ms=1,
            )  # fmt: skip
            await asyncio.sleep(0.01)
            await edge_side.nc.publish(workspace_in_subject(AGENT), old.to_json())
            await edge_side.nc.publish(workspace_in_subject(AGENT), b"{not json")
            fresh = await edge_side.say("hello now")
            await edge_side.wait_for("speak.tui")
        assert (first.stats.stale, first.stats.invalid) == (1, 1)
        # Settled for good: the next life gets neither again.
        async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as second:
            await asyncio.sleep(3)
        assert second.stats.received == 0
    assert [s.event.binding_id for s in edge_side.on("speak.tui")] == [fresh.binding_id]


async def test_a_turn_that_expires_while_queued_is_not_answered(
    catalog: NodeCatalog, event_log: str, edge_side: EdgeSide, tmp_path: Path
) -> None:
    """Before: the TTL was checked on arrival only, so a turn held up behind a slow one
    was answered long after its TTL."""
    gate = asyncio.Event()
    requests: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        requests.append(request)
        if len(requests) == 1:  # the first turn's model call waits for the gate
            return Reply.call("speak", {"text": "first"}, gate=gate)
        return speak_back(request)

    async with ScriptedModel(responder=answer) as model:
        async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as agent:
            first = await edge_side.say("the slow one", received=lambda: agent.stats.received)
            await model.wait_requests(1)
            short = Event.new(
                "sensation.turn", {"text": "a quick one", "device": "tui"},
                source="edge.audio.tui", sequence_number=99, ttl_ms=2000,
            )  # fmt: skip
            await edge_side.nc.publish(workspace_in_subject(AGENT), short.to_json())
            async with asyncio.timeout(30):
                while agent.queued < 1:  # fresh on arrival: queued behind the slow turn
                    await asyncio.sleep(0.02)
            await asyncio.sleep(2.2)  # past its TTL while it waits
            gate.set()
            last = await edge_side.say("after", received=lambda: agent.stats.received)
            await edge_side.wait_for("speak.tui", count=2)
        assert agent.stats.stale == 1
    spoken = [s.event.binding_id for s in edge_side.on("speak.tui")]
    assert spoken == [first.binding_id, last.binding_id]
    assert all("a quick one" not in r.last_user_text for r in requests)


async def test_after_the_event_log_is_deleted_the_inbox_is_made_again_and_answers(
    catalog: NodeCatalog, event_log: str, edge_side: EdgeSide, tmp_path: Path
) -> None:
    """Before: deleting the stream deleted the durable consumer with it; the substrate
    remade the stream, but the node's rail stayed silent and every turn timed out."""
    async with (
        ScriptedModel(responder=speak_back) as model,
        node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path) as agent,
    ):
        await edge_side.say("before the deletion", received=lambda: agent.stats.received)
        await edge_side.wait_for("speak.tui")
        js = edge_side.nc.jetstream()
        await js.delete_stream(EventLogConfig().stream)
        await asyncio.sleep(inbox.CHECK_S * 1.5)  # the node finds its consumer gone
        # As the substrate's health check does: the stream, then the inboxes in it.
        await ensure_stream(edge_side.nc, EventLogConfig())
        await AgentInboxes(EventLogConfig().stream).check(edge_side.nc, [AGENT])
        said = await edge_side.say("after the deletion")
        speaks = await edge_side.wait_for("speak.tui", 2, timeout_s=30)
        assert agent._inbox is not None
        assert agent._inbox.recreated == 1
    assert speaks[1].event.binding_id == said.binding_id
    assert speaks[1].event.payload["text"] == "You said after the deletion."


async def test_a_node_makes_no_consumer_of_its_own(
    catalog: NodeCatalog, event_log: str, edge_side: EdgeSide, tmp_path: Path
) -> None:
    """Before: a node whose durable consumer was missing made one, with whatever filter it
    chose; now only the substrate makes it, and the node does not start without it."""
    js = edge_side.nc.jetstream()
    stream = EventLogConfig().stream
    await js.delete_consumer(stream, agent_inbox_durable(AGENT))
    async with ScriptedModel(responder=speak_back) as model:
        with pytest.raises(InboxMissing, match=agent_inbox_durable(AGENT)):
            async with node(catalog[f"agent.{AGENT}"], event_log, model, tmp_path):
                pass
    names = [info.name for info in await js.consumers_info(stream)]
    assert agent_inbox_durable(AGENT) not in names
