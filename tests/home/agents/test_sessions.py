"""One conversation per device, kept across restarts: real τ, real JMFTS, the scripted model.

Two devices talk to one agent; τ is killed with SIGKILL between their turns, or
the node is stopped and another started on the same data directory. Each
device's next turn must reach the model with its own earlier turns, and never
with the other device's.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient

from home.agents.agent_node import AgentNode
from home.agents.sessions import (
    SESSIONS_FILE,
    FileStore,
    JmftsStore,
    SessionStore,
    jmfts_sessions_path,
    read_sessions,
    read_turns,
)
from home.jmfts.testing import RunningJmfts
from home.llm.endpoint import ModelEndpoint
from shared.messages.history import HistoryReply, HistoryRequest, history_subject
from shared.schema.catalog import NodeCatalog
from tests.home.agents.test_agent_node import speak_back, until
from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import RecordedRequest, ScriptedModel, content_text

AGENT = "edge_asr"


def conversation_text(request: RecordedRequest) -> str:
    """Everything the model was sent for one turn, as one string."""
    return "\n".join(content_text(m.get("content")) for m in request.messages)


def said(text: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", text) is not None


def request_for(model: ScriptedModel, utterance: str, nth: int = -1) -> RecordedRequest:
    """The model request of a turn, found by its last user message."""
    matching = [r for r in model.requests if r.last_user_text.strip() == utterance]
    assert matching, [r.last_user_text for r in model.requests]
    return matching[nth]


async def two_devices(nats_url: str) -> tuple[NatsClient, EdgeSide, EdgeSide]:
    nc = await nats.connect(nats_url)
    kitchen = EdgeSide(nc=nc, agent=AGENT, device="kitchen")
    tui = EdgeSide(nc=nc, agent=AGENT, device="tui")
    await nc.subscribe("events.>", cb=kitchen.on_event)
    await nc.subscribe("events.>", cb=tui.on_event)
    await nc.flush()
    return nc, kitchen, tui


@pytest.fixture(params=["jmfts", "file"])
async def store(
    request: pytest.FixtureRequest, jmfts: RunningJmfts, tmp_path: Path
) -> AsyncIterator[SessionStore]:
    """The agent's conversations in JMFTS (as its own principal), or in τ's file store."""
    if request.param == "file":
        yield FileStore(tmp_path / "agents" / AGENT / "sessions")
        return
    token = await jmfts.principal(f"agent.{AGENT}", [f"journal/{AGENT}"])
    token_file = tmp_path / "agent.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    yield JmftsStore(jmfts.url, token_file, jmfts_sessions_path(AGENT))


def node(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, data_dir: Path, store: SessionStore
) -> AgentNode:
    return AgentNode(
        catalog[f"agent.{AGENT}"],
        nats_url=nats_url,
        data_dir=data_dir,
        model=ModelEndpoint(base_url=model.url),
        repo_root=REPO_ROOT,
        sessions=store,
    )


async def turn(edge: EdgeSide, agent: AgentNode, text: str) -> None:
    done = len(agent.stats.outcomes)
    await edge.say(text, received=lambda: agent.stats.received)
    await until(lambda: len(agent.stats.outcomes) > done)


async def test_each_device_resumes_its_own_conversation_after_tau_is_killed(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, store: SessionStore, tmp_path: Path
) -> None:
    model.responder = speak_back
    nc, kitchen, tui = await two_devices(nats_url)
    try:
        async with node(catalog, nats_url, model, tmp_path, store) as agent:
            await turn(kitchen, agent, "my name is Ada")
            await turn(tui, agent, "my name is Bo")
            first_pid = agent.tau_pid
            assert first_pid is not None
            os.kill(first_pid, signal.SIGKILL)
            await until(lambda: agent.stats.restarts == 1 and agent.tau_pid != first_pid)
            await turn(kitchen, agent, "what is my name")
            await turn(tui, agent, "what is my name")
            stats = agent.stats
    finally:
        await nc.close()

    kitchen_asks = conversation_text(request_for(model, "what is my name", 0))
    tui_asks = conversation_text(request_for(model, "what is my name", 1))
    assert said(kitchen_asks, "Ada") and not said(kitchen_asks, "Bo"), kitchen_asks
    assert said(tui_asks, "Bo") and not said(tui_asks, "Ada"), tui_asks
    assert [o.end_reason for o in stats.outcomes] == ["terminate"] * 4
    assert stats.sessions_created == 2
    assert stats.session_failures == 0
    assert [o.switched for o in stats.outcomes] == [True, True, True, True]


async def test_a_new_node_on_the_same_data_dir_resumes_and_one_device_in_a_row_never_switches(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, store: SessionStore, tmp_path: Path
) -> None:
    model.responder = speak_back
    nc, kitchen, tui = await two_devices(nats_url)
    try:
        async with node(catalog, nats_url, model, tmp_path, store) as agent:
            await turn(kitchen, agent, "my name is Ada")
            await turn(kitchen, agent, "I live by the sea")
            await turn(tui, agent, "my name is Bo")
            first = agent.stats
        async with node(catalog, nats_url, model, tmp_path, store) as agent:
            await turn(kitchen, agent, "what is my name")
            second = agent.stats
            asked = await nc.request(history_subject(AGENT), HistoryRequest("kitchen", 2).to_json())
            history = HistoryReply.from_json(asked.data)
            bad = await nc.request(history_subject(AGENT), b'{"device": "Not A Token"}')
            refused = HistoryReply.from_json(bad.data)
            nobody = await nc.request(history_subject(AGENT), HistoryRequest("hall").to_json())
            unknown = HistoryReply.from_json(nobody.data)
    finally:
        await nc.close()

    asks = conversation_text(request_for(model, "what is my name"))
    assert said(asks, "Ada") and "by the sea" in asks and not said(asks, "Bo"), asks
    assert [o.switched for o in first.outcomes] == [True, False, True]
    assert (second.sessions_created, second.session_switches) == (0, 1)
    book = read_sessions(tmp_path / "agents" / AGENT / SESSIONS_FILE)
    assert sorted(book) == ["kitchen", "tui"]
    turns = read_turns(tmp_path / "agents" / AGENT / "turns.jsonl")
    kitchen_turns = [t for t in turns if t.session_id == book["kitchen"].session_id]
    texts = [t.text for t in kitchen_turns]
    assert texts == ["my name is Ada", "I live by the sea", "what is my name"]
    spoken = [e.event.binding_id for e in kitchen.on("speak.kitchen")]
    assert [t.binding_id for t in kitchen_turns] == spoken
    # What `edge tui` shows on F3: the device's last turns, as its agent reads them.
    assert history.session_id == book["kitchen"].session_id and history.error is None
    assert [(t.said, t.binding_id) for t in history.turns] == [
        ("I live by the sea", spoken[1]),
        ("what is my name", spoken[2]),
    ]
    assert history.turns[1].answer == ("speak: You said what is my name.",)
    assert refused.error is not None and "device" in refused.error
    assert unknown.error == "hall has no conversation yet"


async def test_an_unreadable_session_book_is_moved_aside_and_the_node_still_answers(
    catalog: NodeCatalog, nats_url: str, model: ScriptedModel, tmp_path: Path
) -> None:
    run_dir = tmp_path / "agents" / AGENT
    run_dir.mkdir(parents=True)
    (run_dir / SESSIONS_FILE).write_text(json.dumps({"sessions": [{"device": 3}]}))
    model.responder = speak_back
    nc, kitchen, _ = await two_devices(nats_url)
    try:
        store = FileStore(run_dir / "sessions")
        async with node(catalog, nats_url, model, tmp_path, store) as agent:
            await turn(kitchen, agent, "hello")
            stats = agent.stats
    finally:
        await nc.close()
    assert stats.outcomes[0].end_reason == "terminate"
    assert [p.name.startswith(f"{SESSIONS_FILE}.bad-") for p in run_dir.iterdir()].count(True) == 1
    assert list(read_sessions(run_dir / SESSIONS_FILE)) == ["kitchen"]


async def test_a_new_device_and_a_switch_load_no_other_devices_conversation(
    catalog: NodeCatalog,
    nats_url: str,
    model: ScriptedModel,
    jmfts: RunningJmfts,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """τ loads a conversation with one subtree read of its root: a device's first turn
    reads none (τ's list_sessions would read every stored one), a switch reads its own."""
    token = await jmfts.principal(f"agent.{AGENT}", [f"journal/{AGENT}"])
    token_file = tmp_path / "agent.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    store = JmftsStore(jmfts.url, token_file, jmfts_sessions_path(AGENT))
    documents = jmfts.server.store
    assert documents is not None
    loaded: list[int] = []
    read_subtree = documents.subtree

    def counted(principal: Any, doc_id: int, **kwargs: Any) -> Any:
        loaded.append(doc_id)
        return read_subtree(principal, doc_id, **kwargs)

    monkeypatch.setattr(documents, "subtree", counted)
    model.responder = speak_back
    nc = await nats.connect(nats_url)
    rooms = [EdgeSide(nc=nc, agent=AGENT, device=f"room{i}") for i in range(4)]
    for room in rooms:
        await nc.subscribe("events.>", cb=room.on_event)
    await nc.flush()
    try:
        async with node(catalog, nats_url, model, tmp_path, store) as agent:
            for room in rooms[:3]:
                await turn(room, agent, f"hello from {room.device}")
            loaded.clear()
            await turn(rooms[3], agent, "hello from room3")
            on_first_turn = list(loaded)
            loaded.clear()
            await turn(rooms[0], agent, "back in room0")
            on_switch = list(loaded)
            stats = agent.stats
    finally:
        await nc.close()

    book = read_sessions(tmp_path / "agents" / AGENT / SESSIONS_FILE)
    assert sorted(book) == ["room0", "room1", "room2", "room3"]
    assert stats.sessions_created == 4 and stats.session_failures == 0
    assert on_first_turn == []
    assert on_switch == [int(book["room0"].ref)]
    assert "hello from room0" in conversation_text(request_for(model, "back in room0"))
