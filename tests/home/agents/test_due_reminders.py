"""An agent node's reminders said when nats-server fires them, on a real JetStream server:
spoken on the device that asked under a binding id of their own and settled on the
speech ack; one read after its TTL reported missed; an unreadable one counted, and the
next one still said."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient

from home.agents.answers import AgentPublisher
from home.agents.due_reminders import DueReminders
from home.reminders.book import Reminder, ReminderBook
from home.substrate.nats_server import NatsServer
from home.substrate.reminder_streams import ensure_reminders
from shared.event import EnvelopeLimits, Event
from shared.nats_confirm import confirm_subscriptions
from shared.subjects import (
    reminder_due_subject,
    reply_subject,
    speak_subject,
    speech_completed_subject,
)

AGENT = "edge_asr_memory"
DEVICE = "kitchen"


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[NatsClient]:
    server = NatsServer(tmp_path / "nats")
    await server.start()
    try:
        client = await nats.connect(server.url)
        await ensure_reminders(client, AGENT)
        try:
            yield client
        finally:
            await client.close()
    finally:
        await server.close()


async def reminders_node(
    nc: NatsClient, clock: Callable[[], datetime] | None = None
) -> DueReminders:
    publisher = AgentPublisher(f"agent.{AGENT}", EnvelopeLimits())
    publisher.attach(nc)
    due = DueReminders(AGENT, publisher, **({"clock": clock} if clock else {}))
    await due.start(nc)
    return due


async def test_a_fired_reminder_is_said_on_its_device_and_settled_on_the_ack(
    nc: NatsClient,
) -> None:
    speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
    await confirm_subscriptions(nc)
    due = await reminders_node(nc)
    try:
        now = datetime.now(UTC)
        oven = Reminder.new(AGENT, DEVICE, "check the oven", now + timedelta(seconds=2), now=now,
                            binding_id="a" * 32)  # fmt: skip
        await ReminderBook(nc, AGENT).schedule(oven)
        said = Event.from_json((await speaks.next_msg(timeout=10)).data)
        assert said.payload["text"] == "Reminder: check the oven."
        assert said.binding_id not in (None, oven.binding_id)
        # Its TTL is what is left of the reminder's hour, not the default minute.
        assert said.ttl_ms > 3_000_000
        assert due.stats.said == 0  # not before the device acks
        ack = Event.new("speech.completed", {"ok": True, "device": DEVICE},
                        source="edge.audio.kitchen", sequence_number=1,
                        binding_id=said.binding_id)  # fmt: skip
        await nc.publish(speech_completed_subject(said.binding_id or ""), ack.to_json())
        async with asyncio.timeout(10):
            while due.stats.said != 1:
                await asyncio.sleep(0.05)
    finally:
        await due.close()


async def test_an_unreadable_one_is_counted_and_one_past_its_ttl_is_reported_missed(
    nc: NatsClient,
) -> None:
    replies = await nc.subscribe(reply_subject(AGENT, DEVICE))
    speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
    await confirm_subscriptions(nc)
    # The node reads it two hours on: the reminder's hour of grace is over.
    due = await reminders_node(nc, clock=lambda: datetime.now(UTC) + timedelta(hours=2))
    try:
        await nc.jetstream().publish(reminder_due_subject(AGENT, "junk"), b"{not json")
        now = datetime.now(UTC)
        cat = Reminder.new(AGENT, DEVICE, "feed the cat", now + timedelta(seconds=1), now=now)
        await ReminderBook(nc, AGENT).schedule(cat)
        missed = Event.from_json((await replies.next_msg(timeout=10)).data)
        assert missed.payload["kind"] == "missed" and missed.payload["spoken"] is False
        assert missed.payload["text"] == "Reminder: feed the cat."
        assert "not heard within 3600 s" in missed.payload["reason"]
        assert (due.stats.unreadable, due.stats.missed, due.stats.said) == (1, 1, 0)
        with pytest.raises(TimeoutError):
            await speaks.next_msg(timeout=0.5)
    finally:
        await due.close()
