"""Back-to-back turns with the embedded model while both cores burn (issue 23, item 12).

The ``llm`` component's health check used to kill the model server while it
generated: under load, long answers failed three checks in a row and the server
was restarted mid-turn. Here a CPU burner runs on every core, turns go one after
another through `home up`'s router to the agent, and the model server must never
restart while every turn is answered. The health check asks once a second and
restarts after three misses in a row, so the test runs until the model has spent
``LOADED_S`` seconds answering on burning cores (that many checks landed mid-answer,
each prompt asked at least twice); it ran 50 turns, about three minutes, for the
same claim. Latencies go to
``bench-results/loaded_turns.json``; no timer is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speech_completed_subject
from tests.bench.report import Result, publish
from tests.support.home_up import running_home

# Bounded: at most MAX_TURNS turns of a few seconds to a minute each on two burning cores.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

DEVICE = "tui"
# Seconds of answering under load the claim needs: sixty health checks mid-answer.
LOADED_S = 60.0
MIN_TURNS = 10
MAX_TURNS = 50
# One turn's bound: the agent's wall clock (120 s) and a re-prompt's share on top.
TURN_TIMEOUT_S = 240.0
PROMPTS = (
    "Hello! What is the capital of France?",
    "Is the kettle on?",
    "Tell me a short story about a cat.",
    "What should I cook for dinner tonight?",
    "Remind me what a prime number is.",
)


@contextlib.contextmanager
def cpu_burners() -> Iterator[list[subprocess.Popen[bytes]]]:
    """One busy-looping Python process per core, killed when the block ends."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield burners
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


async def ack_every_speak(nc: NatsClient) -> Subscription:
    """Ack each speak to the device, as the board does after playing it: an answer spoken
    in parts (its first sentence while the model writes the rest) has one per part."""

    async def ack(msg: Msg) -> None:
        speak = Event.from_json(msg.data)
        if speak.binding_id is None:
            return
        done = Event.new(
            "speech.completed", {"ok": True, "device": DEVICE},
            source=f"edge.audio.{DEVICE}", sequence_number=speak.sequence_number,
            binding_id=speak.binding_id,
        )  # fmt: skip
        await nc.publish(speech_completed_subject(speak.binding_id), done.to_json())

    return await nc.subscribe(f"events.workspace.*.out.speak.{DEVICE}", cb=ack)


async def answered_turn(nc: NatsClient, text: str, seq: int) -> tuple[str, float]:
    """Publish one turn as the edge does; its answer kind and latency to the first speak.

    A speak or a non-failure reply answers it; a ``failed`` or ``aborted`` reply is
    returned as such, for the test to count.
    """
    answers = await nc.subscribe(f"events.workspace.*.out.*.{DEVICE}")
    try:
        binding_id = new_binding_id()
        turn = Event.new(
            "sensation.turn", {"text": text, "device": DEVICE}, source=f"edge.audio.{DEVICE}",
            sequence_number=seq, binding_id=binding_id, ttl_ms=int(TURN_TIMEOUT_S * 1000),
        )  # fmt: skip
        started = time.monotonic()
        await nc.publish(sensation_turn_subject(DEVICE), turn.to_json())
        async with asyncio.timeout(TURN_TIMEOUT_S):
            while True:
                msg = await answers.next_msg(timeout=TURN_TIMEOUT_S)
                answer = Event.from_json(msg.data)
                if answer.binding_id != binding_id:
                    continue
                if ".out.speak." in msg.subject:
                    return "speak", time.monotonic() - started
                kind = str(answer.payload.get("kind"))
                if ".out.reply." in msg.subject and kind in ("failed", "aborted"):
                    return kind, time.monotonic() - started
    finally:
        await answers.unsubscribe()


async def test_turns_on_a_loaded_machine_never_restart_the_model(tmp_path: Path) -> None:
    async with running_home(tmp_path / "home", None) as home:
        before = await home.status()
        assert before is not None
        llm_before = next(c for c in before["components"] if c["name"] == "llm")
        kinds: list[str] = []
        latencies: list[float] = []
        nc = await nats.connect(home.nats_url)
        try:
            await ack_every_speak(nc)
            with cpu_burners():
                while len(kinds) < MIN_TURNS or (
                    sum(latencies) < LOADED_S and len(kinds) < MAX_TURNS
                ):
                    seq = len(kinds)
                    kind, latency = await answered_turn(nc, PROMPTS[seq % len(PROMPTS)], seq + 1)
                    kinds.append(kind)
                    latencies.append(latency)
                    print(f"turn {seq + 1}: {kind} in {latency:.1f}s", flush=True)
        finally:
            await nc.close()
        after = await home.status()
        assert after is not None
        llm_after = next(c for c in after["components"] if c["name"] == "llm")

    turns = len(kinds)
    ordered = sorted(latencies)
    publish(
        "loaded_turns",
        [
            Result("turn latency p50", ordered[len(ordered) // 2], "s", turns),
            Result("turn latency max", ordered[-1], "s", turns),
            Result("model server restarts", float(llm_after["restarts"]), "", turns),
        ],
    )
    assert llm_after["restarts"] == 0, llm_after
    assert llm_after["pid"] == llm_before["pid"]
    assert kinds == ["speak"] * turns, kinds
    assert sum(latencies) >= LOADED_S or turns == MAX_TURNS
