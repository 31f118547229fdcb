"""A whole turn inside a real `home up`: sensation → router → τ agent node → speak → ack.

`home up` runs as a process with the shipped catalog and the `edge_asr` schema;
the test plays the edge on home's NATS. With the scripted model server (the
one test double) the turn is exact; one slow test runs the embedded model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path

import nats
import pytest

from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speak_subject, speech_completed_subject
from tests.support.home_up import RunningHome, running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow
DEVICE = "tui"


async def play_edge_turn(
    url: str, text: str, within_s: float, device: str = DEVICE
) -> tuple[str, Event, Event]:
    """Publish a turn as the edge does, answer its speak with an ack; return what came back."""
    nc = await nats.connect(url)
    try:
        answers = await nc.subscribe(f"events.workspace.*.out.*.{device}")
        await nc.flush()
        binding_id = new_binding_id()
        turn = Event.new(
            "sensation.turn", {"text": text, "device": device}, source=f"edge.audio.{device}",
            sequence_number=1, binding_id=binding_id,
        )  # fmt: skip
        await nc.publish(sensation_turn_subject(device), turn.to_json())
        async with asyncio.timeout(within_s):
            while True:
                msg = await answers.next_msg(timeout=within_s)
                answer = Event.from_json(msg.data)
                if answer.binding_id == binding_id and (
                    ".speak." in msg.subject or ".reply." in msg.subject
                ):
                    break
        ack = Event.new(
            "speech.completed", {"ok": True, "device": device}, source=f"edge.audio.{device}",
            sequence_number=2, binding_id=binding_id,
        )  # fmt: skip
        if ".speak." in msg.subject:
            await nc.publish(speech_completed_subject(binding_id), ack.to_json())
            await nc.flush()
        return msg.subject, answer, turn
    finally:
        await nc.close()


async def test_a_turn_through_home_up_with_the_scripted_model(tmp_path: Path) -> None:
    def answer(request: RecordedRequest) -> Reply:
        return Reply.call("speak", {"text": f"You said: {request.last_user_text[-40:]}"})

    async with (
        ScriptedModel(responder=answer) as model,
        running_home(tmp_path / "home", model.url) as home,
    ):
        subject, answer_event, turn = await play_edge_turn(
            home.nats_url, "is the kettle on", within_s=90
        )
        assert subject == speak_subject("edge_asr", DEVICE), answer_event.payload
        assert answer_event.binding_id == turn.binding_id
        assert "is the kettle on" in answer_event.payload["text"]
        assert any("is the kettle on" in r.last_user_text for r in model.requests)
        code, trace = await home.cli("trace", turn.binding_id or "", "--json")
        assert code == 0, trace
        assert "events.workspace.edge_asr.in" in trace
        assert "events.action.speech.completed" in trace
        # The whole turn ran within every node's bus rights (running_home checks that
        # the server refused nothing), each node as its own user.
        status = await home.status()
        assert status is not None
        assert {"agent.edge_asr", "effector.journal_append", "router", "admin"} <= {
            u["user"] for u in status["bus"]["users"]
        }


async def test_the_embedded_model_answers_a_turn_within_a_minute(tmp_path: Path) -> None:
    async with running_home(tmp_path / "home", None) as home:
        _, status = await home.cli("status", "--json")
        components = {c["name"]: c for c in json.loads(status)["components"]}
        assert components["llm"]["address"].endswith("/v1")
        subject, answer_event, turn = await play_edge_turn(
            home.nats_url, "Hello! What is the capital of France?", within_s=60
        )
        assert subject.startswith("events.workspace.edge_asr.out.")
        assert answer_event.binding_id == turn.binding_id
        assert answer_event.payload.get("text")


async def test_kill_9_of_the_agent_node_mid_turn_and_its_next_life_answers(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()
    first: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        if not first:  # the first life's model call hangs until the end of the test
            first.append(request)
            return Reply.call("speak", {"text": "never said"}, gate=gate)
        return Reply.call("speak", {"text": f"Answered: {request.last_user_text[-40:]}"})

    async with (
        ScriptedModel(responder=answer) as model,
        running_home(tmp_path / "home", model.url) as home,
    ):
        pid = await node_pid(home, "agent.edge_asr")
        turn = asyncio.create_task(play_edge_turn(home.nats_url, "are the lights off", 120))
        await model.wait_requests(1, timeout_s=60)
        os.kill(pid, signal.SIGKILL)
        try:
            subject, answer_event, said = await turn
        finally:
            gate.set()
        assert await node_pid(home, "agent.edge_asr") != pid

    assert subject == speak_subject("edge_asr", DEVICE)
    assert answer_event.binding_id == said.binding_id
    assert answer_event.payload["text"] == "Answered: are the lights off"
    assert len(model.requests) == 2


async def node_pid(home: RunningHome, name: str) -> int:
    """The pid of a running node, as `home status --json` reports it."""
    async with asyncio.timeout(120):
        while True:
            _, out = await home.cli("status", "--json")
            with contextlib.suppress(json.JSONDecodeError, KeyError):
                for node in json.loads(out)["nodes"]:
                    if node.get("name") == name and node.get("state") == "running":
                        return int(node["pid"])
            await asyncio.sleep(0.5)


async def test_a_turn_is_answered_after_the_event_log_is_deleted(tmp_path: Path) -> None:
    """Before: the substrate remade a deleted stream, but the agent's durable consumer
    went with it, so the rail stayed silent and every later turn timed out."""

    def answer(request: RecordedRequest) -> Reply:
        return Reply.call("speak", {"text": f"You said: {request.last_user_text[-40:]}"})

    async with (
        ScriptedModel(responder=answer) as model,
        running_home(tmp_path / "home", model.url) as home,
    ):
        await play_edge_turn(home.nats_url, "before the deletion", within_s=60)
        nc = await nats.connect(home.nats_url)
        try:
            await nc.jetstream().delete_stream("EVENTS")
        finally:
            await nc.close()

        async def recreated() -> bool:
            status = await home.status()
            return bool(status and status["event_log"].get("recreated") == 1)

        async with asyncio.timeout(30):
            while not await recreated():
                await asyncio.sleep(0.2)
        subject, answer_event, turn = await play_edge_turn(
            home.nats_url, "after the deletion", within_s=30
        )
    assert subject == speak_subject("edge_asr", DEVICE)
    assert answer_event.binding_id == turn.binding_id
    assert "after the deletion" in answer_event.payload["text"]
