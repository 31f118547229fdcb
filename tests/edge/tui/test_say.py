"""``edge say`` as a real process against a real nats-server, the test playing the agent."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import nats
import pytest

from bridge.node import BridgeCore
from edge.errors import NotTaken
from edge.natsd import LocalNatsServer
from edge.tui.say import say_once
from shared.proc import free_port
from shared.subjects import speech_completed_subject
from tests.bridge.servers import make_pair
from tests.edge.tui.conftest import WAIT_S, PlayedAgent

EDGE = str(Path(sys.executable).with_name("edge"))


async def edge_say(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        EDGE,
        "say",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    try:
        out, err = await asyncio.wait_for(proc.communicate(), WAIT_S * 2)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_say_prints_the_spoken_answer_with_timings_and_acks_it(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    proc = await edge_say("hello there", "--direct", nats_server.url, "--json", "--timeout", "20")
    turn = await agent.next_turn()
    assert turn.payload["text"] == "hello there" and turn.binding_id is not None
    await agent.recall(turn.binding_id, query="hello there", hits=[0.8], passed=1)
    await agent.speak(turn.binding_id, "Hello! How can I help?")
    subject, ack = await agent.next_ack()
    code, out, err = await finish(proc)
    assert code == 0, err
    assert subject == speech_completed_subject(turn.binding_id)
    assert ack.payload["ok"] is True
    result = json.loads(out)
    assert result["binding_id"] == turn.binding_id
    assert result["answer"] == {
        "kind": "speak",
        "agent": "edge_asr",
        "text": "Hello! How can I help?",
        "spoken": True,
    }
    assert result["notes"] == [
        {
            "kind": "recall",
            "agent": "edge_asr",
            "summary": "recall: query 'hello there', 1 of 1 passed",
        }
    ]
    timings = result["timings"]
    assert timings["first_answer_ms"] >= 0
    assert timings["answered_at"] >= timings["sent_at"]


async def test_say_waits_for_every_part_of_an_answer_spoken_in_parts(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    # The handset speaks the first sentence while the model writes the rest: `edge say`
    # acks each part and prints the whole answer, not its first sentence.
    proc = await edge_say("is the kettle on", "--direct", nats_server.url, "--json")
    turn = await agent.next_turn()
    assert turn.binding_id is not None
    await agent.speak(turn.binding_id, "The kettle is on.", more=True)
    await agent.next_ack()
    await asyncio.sleep(0.3)
    assert proc.returncode is None  # still waiting for the rest
    await agent.speak(turn.binding_id, "It has been on for ten minutes.")
    subject, _ack = await agent.next_ack()
    code, out, err = await finish(proc)
    assert code == 0, err
    assert subject == speech_completed_subject(turn.binding_id)
    result = json.loads(out)
    assert result["answer"]["text"] == "The kettle is on. It has been on for ten minutes."


async def test_say_prints_a_reply_rail_answer_with_its_reason(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    proc = await edge_say("list the files", "--direct", nats_server.url, "--device", "tui")
    turn = await agent.next_turn()
    assert turn.binding_id is not None
    await agent.reply(turn.binding_id, "a.txt\nb.txt", reason="a list of file names")
    code, out, err = await finish(proc)
    assert code == 0, err
    assert "edge_asr (reply): a.txt" in out
    assert "not spoken: a list of file names" in out
    assert f"binding {turn.binding_id}" in out


async def test_say_exits_1_when_nothing_answers(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    proc = await edge_say("anyone home", "--direct", nats_server.url, "--timeout", "0.5", "--json")
    turn = await agent.next_turn()
    code, out, err = await finish(proc)
    assert code == 1
    body = json.loads(out)
    assert body["error"] == "timeout" and body["binding_id"] == turn.binding_id
    assert "no speak or reply" in err


async def test_say_exits_1_when_nats_is_unreachable() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    code, _out, err = await finish(await edge_say("hello", "--direct", url))
    assert code == 1
    assert f"cannot reach NATS at {url}" in err


async def test_say_refuses_a_bad_device_with_exit_2(nats_server: LocalNatsServer) -> None:
    code, _out, err = await finish(
        await edge_say("hello", "--direct", nats_server.url, "--device", "Not A Token")
    )
    assert code == 2
    assert "device must be one lowercase token" in err


async def test_say_through_the_bridge_without_a_home_says_how_to_start_one(
    tmp_path: Path,
) -> None:
    # No home runs there and nothing was paired before: there is nothing to pair with.
    code, _out, err = await finish(await edge_say("hello", "--data-dir", str(tmp_path)))
    assert code == 1
    assert f"no running home in {tmp_path}" in err
    assert f"start one with `home up --data-dir {tmp_path}`" in err


async def test_say_through_a_bridge_half_that_refuses_the_turn_fails_at_once(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    """`edge say` asks the edge half to take its turn: a refusal ends it with the reason,
    long before its timeout (the half here is real, with limits no envelope fits)."""
    half = make_pair(tmp_path / "pair").edge
    nc = await nats.connect(nats_server.url)
    core = BridgeCore(replace(half, limits=replace(half.limits, max_event_bytes=64)), nc)
    await core.start()
    try:
        began = time.monotonic()
        with pytest.raises(NotTaken, match="the bridge refused the event") as refused:
            await say_once(nats_server.url, half.device, "hello", timeout_s=30, asks_bridge=True)
        assert time.monotonic() - began < 5
    finally:
        await core.close()
        await nc.close()
    assert refused.value.verdict == "refused" and refused.value.binding_id is not None


async def test_say_listens_for_what_home_says_later_and_acks_it(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    proc = await edge_say(
        "remind me in a minute to check the oven", "--direct", nats_server.url, "--json",
        "--timeout", "20", "--listen", "60", "--until", "OVEN",
    )  # fmt: skip
    turn = await agent.next_turn()
    assert turn.binding_id is not None
    await agent.speak(turn.binding_id, "Okay, I will remind you in 1 minute to check the oven.")
    await agent.next_ack()
    await agent.speak("later-1", "The kettle has boiled.")  # said, kept, and not the end
    await agent.speak("later-2", "Reminder: check the oven.")
    acked = {subject for subject, _ in [await agent.next_ack(), await agent.next_ack()]}
    code, out, err = await finish(proc)
    assert code == 0, err
    later = json.loads(out)["later"]
    assert [(x["binding_id"], x["text"]) for x in later] == [
        ("later-1", "The kettle has boiled."),
        ("later-2", "Reminder: check the oven."),
    ]
    assert acked == {speech_completed_subject("later-1"), speech_completed_subject("later-2")}
