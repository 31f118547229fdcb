"""Whatever the model writes for a verb's call, an invalid call never reaches an effector.

The desk asks its model for a note's call (home/intent/calls.py); here the model is the
scripted server answering with random strings and near-calls, and everything after it is
real: the bus, the journal effector, JMFTS. A reply that is exactly the note's object of
the turn's last words becomes one journal entry holding those words; anything else writes
nothing and the speaker is asked again, aloud (never silence)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription

from home.agents.admission import PendingTurn
from home.agents.answers import AgentPublisher
from home.agents.verb_desk import CLARIFY, VerbDesk
from home.effectors.effector import Effector
from home.effectors.journal_append import SPEC as JOURNAL_APPEND
from home.intent.calls import CallWriter
from home.intent.frames import framed_call
from home.intent.step import IntentStep, Verb, load_intent_step
from home.jmfts.testing import RunningJmfts, running_jmfts
from home.tau_extensions.binding import TurnBinding
from shared.event import EnvelopeLimits, Event, new_binding_id
from shared.subjects import speak_subject
from tests.support.json_strategy import json_values
from tests.support.scripted_model import Reply, ScriptedModel

AGENT = "edge_asr_memory"
DEVICE = "hall"
# A note in a frame the desk does not know, so the model writes its call.
SAID = "put it in my diary the boiler was serviced today"
WORDS = SAID.split()

runs = st.tuples(st.integers(0, len(WORDS)), st.integers(0, len(WORDS))).map(
    lambda ij: " ".join(WORDS[min(ij) : max(ij)])
)
values = runs | st.text(max_size=40) | json_values(max_leaves=3)
replies = (
    st.text(max_size=120)
    | json_values(max_leaves=6).map(json.dumps)
    | st.dictionaries(st.sampled_from(["text", "note", "when"]), values, max_size=3).map(json.dumps)
    | st.fixed_dictionaries({"text": values}).map(json.dumps)
)


def acceptable(reply: str) -> str | None:
    """What the note must say if ``reply`` is a valid call, worked out independently of
    the reader: one key ``text``, a string of the last words of what was said."""
    try:
        call = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(call, dict) or list(call) != ["text"] or not isinstance(call["text"], str):
        return None
    text = call["text"]
    tails = {" ".join(WORDS[i:]) for i in range(len(WORDS))}
    return text if text in tails else None


@dataclass
class World:
    desk: VerbDesk
    model: ScriptedModel
    effector: Effector
    speaks: Subscription


@pytest.fixture(scope="module")
def step() -> IntentStep:
    return load_intent_step()


@pytest.fixture
async def world(nats_url: str, tmp_path: Path, step: IntentStep) -> AsyncIterator[World]:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    async with running_jmfts(tmp_path / "jmfts") as jmfts, ScriptedModel() as model:
        await prepare(jmfts, tokens)
        nc: NatsClient = await nats.connect(nats_url)
        publisher = AgentPublisher(f"agent.{AGENT}", EnvelopeLimits())
        publisher.attach(nc)
        desk = VerbDesk(AGENT, publisher, memory=None, memory_root=f"workspace/{AGENT}",
                        calls=CallWriter(model.url, "scripted"))  # fmt: skip
        desk.step = step
        await desk.attach(nc)
        speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
        try:
            async with Effector(
                JOURNAL_APPEND, nats_url=nats_url, jmfts_url=jmfts.url, token_dir=tokens
            ) as effector:
                yield World(desk, model, effector, speaks)
        finally:
            await desk.close()
            await nc.close()


async def prepare(jmfts: RunningJmfts, tokens: Path) -> None:
    token = await jmfts.principal(AGENT, [f"journal/{AGENT}"])
    (tokens / f"{AGENT}.token").write_text(token)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=replies)
@example(reply='{"text": "the boiler was serviced today"}')
@example(reply='{"text": "the boiler was serviced"}')
@example(reply='{"text": "the boiler was serviced yesterday"}')
@example(reply='{"text": ""}')
@example(reply="")
async def test_an_invalid_call_never_reaches_the_effector(world: World, reply: str) -> None:
    assert framed_call(Verb.NOTE, SAID) is None
    world.model.script(Reply.say(reply))
    received, ok = world.effector.stats.received, world.effector.stats.ok
    binding = TurnBinding(new_binding_id(), DEVICE, "e1", 1)

    assert await world.desk.take(PendingTurn(SAID, binding, {}, 0.0))

    said = Event.from_json((await world.speaks.next_msg(timeout=10)).data)
    assert said.binding_id == binding.binding_id
    spoken = said.payload["text"]
    note = acceptable(reply)
    if note is None:
        assert world.effector.stats.received == received, reply
        assert spoken == CLARIFY[Verb.NOTE]
    else:
        assert (world.effector.stats.received, world.effector.stats.ok) == (received + 1, ok + 1)
        assert spoken == f"Noted: {note}."
