"""Conversations through a real `home up`: kept per device in JMFTS, resumed after every restart.

Two devices (`kitchen`, `tui`) talk to the `edge_asr` agent with the scripted
model; then τ is SIGKILLed, the agent node is SIGKILLed, and `home up` is stopped
and started again on the same data directory. After each, a device's question
reaches the model with that device's earlier turns and never the other's, and
`home sessions list|show` read the conversation back.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path

import psutil
import pytest

from tests.home.test_home_turn import node_pid, play_edge_turn
from tests.support.home_up import RunningHome, running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel, content_text

pytestmark = pytest.mark.slow
ASK = "what is my name"


def answer(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": f"You said: {request.last_user_text[-40:]}"})


def asked(model: ScriptedModel) -> str:
    """Everything the model was sent for the latest question."""
    request = [r for r in model.requests if r.last_user_text.strip() == ASK][-1]
    return "\n".join(content_text(m.get("content")) for m in request.messages)


def names(text: str) -> set[str]:
    return {name for name in ("Ada", "Bo") if re.search(rf"\b{name}\b", text)}


async def say(home: RunningHome, device: str, text: str) -> str:
    """One turn from ``device``; its binding id."""
    _, answer_event, turn = await play_edge_turn(home.nats_url, text, 120, device=device)
    assert answer_event.binding_id == turn.binding_id
    return turn.binding_id or ""


async def tau_pid(home: RunningHome) -> int:
    """The τ process under the agent node."""
    node = psutil.Process(await node_pid(home, "agent.edge_asr"))
    async with asyncio.timeout(60):
        while True:
            taus = [p for p in node.children() if "--mode" in p.cmdline()]
            if taus:
                return taus[0].pid
            await asyncio.sleep(0.2)


async def test_each_device_resumes_its_conversation_after_tau_node_and_home_restart(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "home"
    kitchen: list[str] = []
    async with ScriptedModel(responder=answer) as model:
        async with running_home(data_dir, model.url) as home:
            kitchen.append(await say(home, "kitchen", "my name is Ada"))
            await say(home, "tui", "my name is Bo")

            os.kill(await tau_pid(home), signal.SIGKILL)
            kitchen.append(await say(home, "kitchen", ASK))
            after_tau = names(asked(model))

            node = await node_pid(home, "agent.edge_asr")
            os.kill(node, signal.SIGKILL)
            assert await node_pid(home, "agent.edge_asr") != node
            await say(home, "tui", ASK)
            after_node = names(asked(model))

        async with running_home(data_dir, model.url) as home:
            kitchen.append(await say(home, "kitchen", ASK))
            after_home = names(asked(model))
            code, listed = await home.cli("sessions", "list", "--device", "kitchen", "--json")
            assert code == 0, listed
            rows = json.loads(listed)
            code, shown = await home.cli("sessions", "show", rows[0]["session_id"], "--json")
            assert code == 0, shown

    assert after_tau == {"Ada"}
    assert after_node == {"Bo"}
    assert after_home == {"Ada"}
    assert [(r["agent"], r["device"], r["store"], r["turns"]) for r in rows] == [
        ("edge_asr", "kitchen", "jmfts", 3)
    ]
    turns = json.loads(shown)["turns"]
    assert [t["said"] for t in turns] == ["my name is Ada", ASK, ASK]
    assert [t["binding_id"] for t in turns] == kitchen
    assert turns[0]["answer"] == ["speak: You said: my name is Ada"]
    times = [t["at"] for t in turns]
    assert times == sorted(times)
