"""Delegation inside a real `home up`: the acceptance of the delegation round trip.

`home up` runs the shipped catalog with the `edge_asr` schema: the asker
`agent.edge_asr`, the operator `agent.jmfts_operator` (granted read on the asker's
memory by `home up`, from its catalog entry), the router and JMFTS. The test plays
the edge on home's NATS; the scripted model plays both agents
(tests/support/delegation.py). `home trace` must show every hop under one binding id.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from home.jmfts.client import JmftsClient, read_token_file
from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speech_completed_subject
from tests.support.delegation import FACT, FINDING_OUT, QUESTION, delegation_responder
from tests.support.home_up import RunningHome, running_home
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.slow
DEVICE = "tui"


async def store_fact(home: RunningHome, agent: str, text: str, usetype: str | None = None) -> int:
    """Write ``text`` into the agent's workspace as the agent itself (its own token); its id."""
    status = await home.status()
    assert status is not None
    (jmfts,) = [c for c in status["components"] if c["name"] == "jmfts"]
    token = read_token_file(home.data_dir / "tokens" / f"{agent}.token")
    async with JmftsClient(jmfts["address"], token=token) as client:
        workspace = await client.resolve(f"workspace/{agent}")
        doc = await client.create(title=None, content=text, parent_id=workspace.id, usetype=usetype)
        return doc.id


async def ask_and_listen(
    url: str, text: str, speaks: int, within_s: float
) -> tuple[str, list[str]]:
    """Say ``text`` as the edge, ack every speak of the turn; the binding id and what was said."""
    nc = await nats.connect(url)
    try:
        heard = await nc.subscribe(f"events.workspace.*.out.speak.{DEVICE}")
        await nc.flush()
        binding_id = new_binding_id()
        turn = Event.new(
            "sensation.turn", {"text": text, "device": DEVICE}, source=f"edge.audio.{DEVICE}",
            sequence_number=1, binding_id=binding_id,
        )  # fmt: skip
        await nc.publish(sensation_turn_subject(DEVICE), turn.to_json())
        said: list[str] = []
        async with asyncio.timeout(within_s):
            while len(said) < speaks:
                speak = Event.from_json((await heard.next_msg(timeout=within_s)).data)
                if speak.binding_id != binding_id:
                    continue
                said.append(speak.payload["text"])
                ack = Event.new(
                    "speech.completed", {"ok": True, "device": DEVICE},
                    source=f"edge.audio.{DEVICE}", sequence_number=1 + len(said),
                    binding_id=binding_id,
                )  # fmt: skip
                await nc.publish(speech_completed_subject(binding_id), ack.to_json())
        await nc.flush()
        return binding_id, said
    finally:
        await nc.close()


def in_order(subjects: list[str], hops: list[str]) -> list[str]:
    """The hops not found in ``subjects`` in this order (empty: every hop, in order)."""
    missing, at = [], 0
    for hop in hops:
        found = next((i for i in range(at, len(subjects)) if subjects[i].startswith(hop)), None)
        if found is None:
            missing.append(hop)
        else:
            at = found + 1
    return missing


async def test_a_delegated_question_answered_from_memory_is_spoken_and_traced(
    tmp_path: Path,
) -> None:
    async with (
        ScriptedModel(responder=delegation_responder) as model,
        running_home(tmp_path / "home", model.url) as home,
    ):
        await store_fact(home, "edge_asr", FACT)
        binding_id, said = await ask_and_listen(home.nats_url, QUESTION, 2, within_s=120)
        # speech.completed of the last speak is logged a moment after it is published.
        for _ in range(50):
            code, out = await home.cli("trace", binding_id, "--json")
            subjects = [item["subject"] for item in json.loads(out)] if code == 0 else []
            if subjects and subjects[-1].startswith("events.action.speech.completed"):
                break
            await asyncio.sleep(0.2)

    assert said == [FINDING_OUT, f"I remember this: {FACT}"]
    hops = [
        "events.sensation.tui.turn",  # sensation
        "events.workspace.edge_asr.in",  # asker
        "events.workspace.edge_asr.out.delegate",  # delegate
        "events.workspace.jmfts_operator.in",  # operator
        f"events.journal.delegate.{binding_id}",  # ack (the operator took it)
        "events.workspace.jmfts_operator.out.recall.tui",  # search
        "events.workspace.jmfts_operator.out.answer.edge_asr",  # answer
        "events.workspace.edge_asr.in",  # asker, again
        "events.workspace.edge_asr.out.speak.tui",  # speak
        f"events.action.speech.completed.{binding_id}",
    ]
    assert in_order(subjects, hops) == [], subjects
    assert len([s for s in subjects if s.endswith(".out.speak.tui")]) == 2, subjects
