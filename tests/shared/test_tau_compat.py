"""Envelope compatibility, both ways, with τ's real builtin ``nats_bus`` extension.

The extension is registered on τ's real ``ExtensionAPI`` and talks to a real
nats-server: an event we build must pass its inbound parser, and the envelope
its speak tool publishes must parse as ours, with our ack accepted by it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from tau_agent_core.extension_types import ExtensionAPI
from tau_agent_core.extensions.registry import ExtensionRegistry
from tau_agent_core.extensions.runner import ExtensionHandlers
from tau_agent_core.extensions_builtin import nats_bus

from shared.event import EnvelopeLimits, Event, new_binding_id
from shared.subjects import speech_completed_subject, workspace_in_subject

AGENT = "edge_asr"


class LoadedNatsBus:
    """τ's nats_bus registered on a real ExtensionAPI, with what it emits recorded."""

    def __init__(self, url: str) -> None:
        self.handlers = ExtensionHandlers(path="nats_bus")
        self.registry = ExtensionRegistry()
        self.api = ExtensionAPI(
            registry=self.registry,
            hook_handlers=self.handlers,
            config={
                "workspace": AGENT,
                "inbound_subject": workspace_in_subject(AGENT),
                "nats_url": url,
                "verbs": ["speak"],
                "ack_timeout_s": 5,
            },
        )
        nats_bus.register(self.api)
        self.emitted: list[tuple[str, Any]] = []
        for topic in ("inbound", "inbound_error", "turn_error", "inbound_dropped"):
            self.api.on(
                f"ext:{self.handlers.name}:{topic}",
                lambda payload, t=topic: self.emitted.append((t, payload)),
            )

    async def fire(self, hook: str) -> None:
        for handler in self.handlers.handlers.get(hook, []):
            await handler({}, None)

    async def wait_emitted(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.emitted) < count:
                await asyncio.sleep(0.01)


@pytest.fixture
async def tau_bus(nats_url: str) -> AsyncIterator[LoadedNatsBus]:
    loaded = LoadedNatsBus(nats_url)
    await loaded.fire("session_start")
    try:
        yield loaded
    finally:
        await loaded.fire("session_shutdown")


async def test_our_event_passes_taus_inbound_parser(tau_bus: LoadedNatsBus, nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        event = Event.new(
            "sensation.turn",
            {"text": "is the kettle on"},
            source="router",
            sequence_number=1,
            binding_id=new_binding_id(),
        )
        await nc.publish(workspace_in_subject(AGENT), event.to_json(EnvelopeLimits()))
        await nc.flush()
        # The parser accepts, then τ tries to submit a turn; this api has no
        # session behind it, so the submit itself fails after parsing.
        await tau_bus.wait_emitted(2)
    finally:
        await nc.close()
    topics = [t for t, _ in tau_bus.emitted]
    assert topics[0] == "inbound", tau_bus.emitted
    assert "inbound_error" not in topics
    seen = tau_bus.emitted[0][1]["event"]
    assert Event.from_dict(seen) == event


async def test_taus_parser_rejects_a_payload_without_text(
    tau_bus: LoadedNatsBus, nats_url: str
) -> None:
    nc = await nats.connect(nats_url)
    try:
        event = Event.new("sensation.turn", {"words": []}, source="router", sequence_number=1)
        await nc.publish(workspace_in_subject(AGENT), event.to_json())
        await nc.flush()
        await tau_bus.wait_emitted(1)
    finally:
        await nc.close()
    assert tau_bus.emitted[0][0] == "inbound_error"


async def test_taus_speak_envelope_parses_and_our_ack_completes_it(
    tau_bus: LoadedNatsBus, nats_url: str
) -> None:
    nc = await nats.connect(nats_url)
    binding_id = new_binding_id()
    try:
        # Drive an inbound event first so τ stamps our binding id on what it publishes.
        inbound = Event.new(
            "sensation.turn", {"text": "hi"}, source="router", sequence_number=1,
            binding_id=binding_id,
        )  # fmt: skip
        await nc.publish(workspace_in_subject(AGENT), inbound.to_json())
        await nc.flush()
        await tau_bus.wait_emitted(1)

        speaks = await nc.subscribe(f"events.workspace.{AGENT}.out.speak")
        # Twice: nats-py may send flush()'s PING ahead of the pending SUB.
        await nc.flush()
        await nc.flush()

        async def effector() -> Event:
            msg = await speaks.next_msg(timeout=5)
            spoken = Event.from_json(msg.data, EnvelopeLimits())
            assert spoken.binding_id is not None
            ack = Event.new(
                "speech.completed",
                {"ok": True, "binding_id": spoken.binding_id},
                source="edge.audio.tui",
                sequence_number=1,
                binding_id=spoken.binding_id,
            )
            await nc.publish(speech_completed_subject(spoken.binding_id), ack.to_json())
            return spoken

        speak = tau_bus.registry.get_active_tools()["speak"]
        effector_task = asyncio.create_task(effector())
        result = await speak.execute("call-1", {"text": "It is on."}, None, None, None)
        spoken = await effector_task
    finally:
        await nc.close()
    assert spoken.payload == {"text": "It is on.", "agent": AGENT}
    assert spoken.binding_id == binding_id
    assert spoken.source == f"agent.{AGENT}"
    assert result["terminate"] is True
    assert "spoken" in json.dumps(result["content"])


async def test_a_failed_ack_of_ours_is_a_tool_error_in_tau(
    tau_bus: LoadedNatsBus, nats_url: str
) -> None:
    nc = await nats.connect(nats_url)
    try:
        speaks = await nc.subscribe(f"events.workspace.{AGENT}.out.speak")
        # Twice: nats-py may send flush()'s PING ahead of the pending SUB.
        await nc.flush()
        await nc.flush()

        async def effector() -> None:
            msg = await speaks.next_msg(timeout=5)
            spoken = Event.from_json(msg.data)
            assert spoken.binding_id is not None
            ack = Event.new(
                "speech.completed",
                {"ok": False, "error": "sink failed"},
                source="edge.audio.tui",
                sequence_number=1,
                binding_id=spoken.binding_id,
            )
            await nc.publish(speech_completed_subject(spoken.binding_id), ack.to_json())

        speak = tau_bus.registry.get_active_tools()["speak"]
        effector_task = asyncio.create_task(effector())
        with pytest.raises(Exception, match="sink failed"):
            await speak.execute("call-2", {"text": "hello"}, None, None, None)
        await effector_task
    finally:
        await nc.close()
