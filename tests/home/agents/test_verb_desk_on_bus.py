"""The verb desk on a real bus and memory server: "forget that" retracts what the turn
before kept (read off the memory reflex's report); "forget what I said about X" asks
first and retracts only on a "yes"; a retraction is on record and undoable. The whole
path through `home up` with the embedded model is tests/home/test_voice_verbs.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient

from home.agents.admission import PendingTurn
from home.agents.answers import AgentPublisher
from home.agents.verb_desk import VerbDesk
from home.intent.step import IntentStep, load_intent_step
from home.jmfts.client import SyncJmftsClient
from home.jmfts.testing import RunningJmfts, running_jmfts
from home.memory.forget import Restored, restore
from home.memory.memories import MemoryStore
from home.memory.origin import MemoryOrigin, memory_origin
from home.tau_extensions.binding import TurnBinding
from shared.event import EnvelopeLimits, Event, new_binding_id
from shared.messages.memory import Deposit, MemorizeReport
from shared.nats_confirm import confirm_subscriptions
from shared.subjects import memorize_subject, speak_subject

AGENT = "edge_asr_memory"
DEVICE = "kitchen"
ROOT = f"workspace/{AGENT}"


@pytest.fixture(scope="module")
def step() -> IntentStep:
    return load_intent_step()


@pytest.fixture
async def jmfts(tmp_path: Path) -> AsyncIterator[RunningJmfts]:
    async with running_jmfts(tmp_path / "jmfts") as server:
        yield server


@pytest.fixture
async def desk(
    nats_url: str, jmfts: RunningJmfts, step: IntentStep
) -> AsyncIterator[tuple[VerbDesk, NatsClient, MemoryStore]]:
    await jmfts.ensure_path(ROOT)
    token = await jmfts.principal(f"agent.{AGENT}", [ROOT])
    nc = await nats.connect(nats_url)
    publisher = AgentPublisher(f"agent.{AGENT}", EnvelopeLimits())
    publisher.attach(nc)
    store = MemoryStore(jmfts.url, token=token)
    desk = VerbDesk(AGENT, publisher, memory=MemoryStore(jmfts.url, token=token), memory_root=ROOT)
    desk.step = step
    await desk.attach(nc)
    try:
        yield desk, nc, store
    finally:
        await desk.close()
        await store.close()
        await nc.close()


def turn(text: str) -> PendingTurn:
    binding = TurnBinding(new_binding_id(), DEVICE, "e1", 1)
    return PendingTurn(text, binding, {}, 0.0)


async def kept_by(nc: NatsClient, said: PendingTurn, doc_id: int) -> None:
    """Publish the memory reflex's report of ``said``'s turn, keeping ``doc_id``."""
    report = MemorizeReport("ev1", "deposited", ROOT, deposits=(Deposit(doc_id, "created"),))
    event = report.to_event(
        source=f"agent.{AGENT}", sequence_number=1, binding_id=said.binding.binding_id
    )
    await nc.publish(memorize_subject(AGENT, DEVICE), event.to_json())
    await nc.flush()


async def current_ids(store: MemoryStore) -> set[int]:
    root = await store.resolve(ROOT)
    hits = await store.vector_search("locker code car", root, 20)
    return {h.id for h in hits}


async def test_forget_that_retracts_what_the_turn_before_kept(
    desk: tuple[VerbDesk, NatsClient, MemoryStore], jmfts: RunningJmfts
) -> None:
    verbs, nc, store = desk
    speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
    await confirm_subscriptions(nc)
    root = await store.resolve(ROOT)
    locker = (await store.deposit(root, "my locker code is 4512")).id
    said = turn("my locker code is 4512")
    assert not await verbs.take(said)  # a fact: τ's, and its reflex keeps it
    verbs.passed(said)
    await kept_by(nc, said, locker)

    forget = turn("forget that")
    assert await verbs.take(forget)
    spoken = Event.from_json((await speaks.next_msg(timeout=5)).data)
    assert spoken.payload["text"] == "Done, I have forgotten it."
    assert spoken.binding_id == forget.binding.binding_id
    assert locker not in await current_ids(store)

    def by_hand() -> tuple[MemoryOrigin, Restored]:
        # What `home memory show` and `home memory restore` do, as the CLI's client does it.
        with SyncJmftsClient(jmfts.url, jmfts.admin_token) as admin:
            return memory_origin(admin, locker), restore(admin, locker)

    origin, back = await asyncio.to_thread(by_hand)
    (retraction,) = origin.retracted_by
    assert retraction.binding_id == forget.binding.binding_id
    assert retraction.content == "forgotten by voice on kitchen: forget that"
    assert any("forgotten: retracted by" in line for line in origin.lines())
    assert back.retraction_id == retraction.id
    assert back.restored_id in await current_ids(store)
    assert verbs.stats.taken["forget"] == 1


async def test_forget_about_something_asks_first_and_only_a_yes_retracts(
    desk: tuple[VerbDesk, NatsClient, MemoryStore],
) -> None:
    verbs, nc, store = desk
    speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
    await confirm_subscriptions(nc)
    root = await store.resolve(ROOT)
    car = (await store.deposit(root, "my car is a blue volvo")).id

    assert await verbs.take(turn("forget what I said about my car"))
    asked = Event.from_json((await speaks.next_msg(timeout=5)).data)
    assert (
        asked.payload["text"]
        == "Should I forget this: my car is a blue volvo? Say yes to forget it."
    )
    # Anything but a yes drops the question; the turn is judged as any other.
    assert not await verbs.take(turn("what's the weather like"))
    assert car in await current_ids(store)

    assert await verbs.take(turn("forget what I said about my car"))
    await speaks.next_msg(timeout=5)
    assert await verbs.take(turn("yes please"))
    done = Event.from_json((await speaks.next_msg(timeout=5)).data)
    assert done.payload["text"] == "Done, I have forgotten that my car is a blue volvo."
    assert car not in await current_ids(store)


async def test_nothing_kept_or_found_is_said_not_silent(
    desk: tuple[VerbDesk, NatsClient, MemoryStore],
) -> None:
    verbs, nc, _ = desk
    speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
    await confirm_subscriptions(nc)
    said = turn("tell me a joke")
    verbs.passed(said)
    report = MemorizeReport("ev2", "skipped", ROOT)
    event = report.to_event(
        source=f"agent.{AGENT}", sequence_number=2, binding_id=said.binding.binding_id
    )
    await nc.publish(memorize_subject(AGENT, DEVICE), event.to_json())
    assert await verbs.take(turn("forget that"))
    nothing = Event.from_json((await speaks.next_msg(timeout=30)).data)
    assert nothing.payload["text"] == "I did not keep anything from what you just said."
    assert await verbs.take(turn("forget what I said about the moon landing"))
    unknown = Event.from_json((await speaks.next_msg(timeout=5)).data)
    assert unknown.payload["text"] == "I do not remember anything about the moon landing."
    assert await verbs.take(turn("remind me to call bob"))
    when = Event.from_json((await speaks.next_msg(timeout=5)).data)
    assert when.payload["text"].startswith("When should I remind you?")
