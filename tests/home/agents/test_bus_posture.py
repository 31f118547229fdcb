"""The other posture: τ's own builtin ``nats_bus``, unchanged, as a node the catalog can name.

τ subscribes the agent's inbound rail itself, drives one turn per event, and
its speak waits for our ``speech.completed`` ack: the envelope and the verb
contract are the same wire either way.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from home.agents.agent_node import AgentNode
from home.agents.protocol import WireEvent
from home.llm.endpoint import ModelEndpoint
from home.substrate.bus_auth import BusAuthority
from home.substrate.nats_server import NatsServer
from shared.bus_credentials import ADMIN_USER
from shared.schema.catalog import NodeSpec, parse_node_catalog
from shared.yaml_source import parse_yaml
from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import Reply, ScriptedModel

CATALOG = """
catalog: bus-posture
nodes:
  agent.edge_asr:
    kind: tau_bus_agent
    runs_on: home
    publishes: [events.workspace.edge_asr.out.>]
    subscribes: [events.workspace.edge_asr.in, events.action.speech.completed.*]
    config:
      nats_bus: {ack_timeout_s: 5}
    wall_clock_s: 60
"""


@pytest.fixture
def bus_spec() -> NodeSpec:
    return parse_node_catalog(parse_yaml(CATALOG, "bus-posture.yaml"), "bus-posture.yaml")[
        "agent.edge_asr"
    ]


async def test_taus_builtin_nats_bus_completes_a_turn_against_our_events(
    bus_spec: NodeSpec, nats_url: str, model: ScriptedModel, edge: EdgeSide, tmp_path: Path
) -> None:
    model.script(Reply.call("speak", {"text": "It is on."}))
    ends: list[WireEvent] = []
    async with AgentNode(
        bus_spec,
        nats_url=nats_url,
        data_dir=tmp_path,
        model=ModelEndpoint(base_url=model.url),
        repo_root=REPO_ROOT,
    ) as node:
        assert node.launch.uses_bus
        assert "tau_agent_core.extensions_builtin.nats_bus" in node.launch.argv
        node.watch_wire(lambda e: ends.append(e) if e.type == "agent_end" else None)
        # τ's nats_bus has no dedupe, so repeat only until τ has asked the model.
        said = await edge.say("is the kettle on", received=lambda: len(model.requests))
        speaks = await edge.wait_for("speak")
        async with asyncio.timeout(30):
            while not ends:
                await asyncio.sleep(0.02)

    (speak,) = speaks
    # τ's own verb subject carries no device; the router resolves it from the binding id.
    assert speak.subject == "events.workspace.edge_asr.out.speak"
    assert speak.event.binding_id == said.binding_id
    assert speak.event.payload == {"text": "It is on.", "agent": "edge_asr"}
    assert ends[0].end_reason == "terminate"
    assert model.requests[0].last_user_text == "is the kettle on"


async def test_taus_builtin_nats_bus_completes_a_turn_on_a_bus_with_authorization(
    bus_spec: NodeSpec, model: ScriptedModel, tmp_path: Path
) -> None:
    """τ takes nothing but a URL: the node's credentials ride in it, and the turn runs
    within the node's rights (the server refuses nothing)."""
    authority = BusAuthority(tmp_path, tmp_path / "nats" / "authorization.conf")
    await authority.authorize([bus_spec], [])
    server = NatsServer(tmp_path / "nats", authority=authority)
    await server.start()
    try:
        admin = await nats.connect(authority.url(ADMIN_USER, server.url))
        edge = EdgeSide(nc=admin, agent="edge_asr")
        await admin.subscribe("events.>", cb=edge.on_event)
        await admin.flush()
        model.script(Reply.call("speak", {"text": "It is on."}))
        node_url = authority.url(bus_spec.name, server.url)
        try:
            async with AgentNode(
                bus_spec,
                nats_url=node_url,
                data_dir=tmp_path,
                model=ModelEndpoint(base_url=model.url),
                repo_root=REPO_ROOT,
            ) as node:
                assert not any(node_url in arg for arg in node.launch.argv)
                said = await edge.say("is the kettle on", received=lambda: len(model.requests))
                (speak,) = await edge.wait_for("speak")
        finally:
            await admin.close()
        assert speak.subject == "events.workspace.edge_asr.out.speak"
        assert speak.event.binding_id == said.binding_id
        assert server.scan_violations() == []
    finally:
        await server.close()
