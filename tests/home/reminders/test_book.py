"""Reminders kept by nats-server's own message scheduling, on a real JetStream server.

Each reminder is a one-shot scheduled message: it fires at its time through the
agent's consumer, a cancelled one never fires, and one whose time passes while the
server is down (killed) fires when it is back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.client import JetStreamContext

from home.reminders.book import Fired, Reminder, ReminderBook
from home.reminders.errors import NoTimeSaid, ReminderError
from home.substrate.nats_server import NatsServer
from home.substrate.reminder_streams import ensure_reminders
from shared.subjects import reminder_schedule_subject, reminders_durable, reminders_stream

AGENT = "edge_asr_memory"


def soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def reminder(text: str, due: datetime, *, device: str = "board") -> Reminder:
    return Reminder.new(AGENT, device, text, due, now=datetime.now(UTC), binding_id="b" * 32)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[NatsServer]:
    running = NatsServer(tmp_path / "nats")
    await running.start()
    try:
        yield running
    finally:
        await running.close()


@pytest.fixture
async def nc(server: NatsServer) -> AsyncIterator[NatsClient]:
    client = await nats.connect(server.url)
    await ensure_reminders(client, AGENT)
    try:
        yield client
    finally:
        await client.close()


async def fired(nc: NatsClient, within_s: float) -> list[Fired]:
    """What the agent's consumer hands over within ``within_s``, each acked."""
    sub: JetStreamContext.PullSubscription = await nc.jetstream().pull_subscribe_bind(
        reminders_durable(AGENT), stream=reminders_stream(AGENT)
    )
    out: list[Fired] = []
    deadline = asyncio.get_running_loop().time() + within_s
    while (left := deadline - asyncio.get_running_loop().time()) > 0:
        try:
            msgs = await sub.fetch(1, timeout=min(left, 1.0))
        except TimeoutError:
            continue
        for msg in msgs:
            out.append(Fired.read(msg))
            await msg.ack()
    await sub.unsubscribe()
    return out


async def test_a_reminder_fires_at_its_time_through_the_agents_consumer(nc: NatsClient) -> None:
    book = ReminderBook(nc, AGENT)
    oven = reminder("check the oven", soon(2))
    await book.schedule(oven)
    assert [r.id for r in await book.pending()] == [oven.id]

    early = await fired(nc, within_s=0.5)
    assert early == []
    got = await fired(nc, within_s=6)
    assert [f.reminder for f in got] == [oven]
    assert got[0].reminder is not None and got[0].reminder.spoken() == "Reminder: check the oven."
    # Fired: no longer pending.
    assert await book.pending() == []


async def test_a_cancelled_reminder_never_fires_and_the_others_do(nc: NatsClient) -> None:
    book = ReminderBook(nc, AGENT)
    keep, drop = reminder("feed the cat", soon(2)), reminder("call the garage", soon(2))
    for r in (keep, drop):
        await book.schedule(r)
    cancelled = await book.cancel(drop.id[:6])
    assert [r.id for r in cancelled] == [drop.id]
    assert [r.id for r in await book.pending()] == [keep.id]
    got = await fired(nc, within_s=6)
    assert [f.reminder.id for f in got if f.reminder] == [keep.id]
    assert await book.cancel(drop.id) == []


async def test_pending_is_soonest_first_and_cancel_all_takes_every_one(nc: NatsClient) -> None:
    book = ReminderBook(nc, AGENT)
    later, sooner = reminder("later", soon(3600)), reminder("sooner", soon(600))
    for r in (later, sooner):
        await book.schedule(r)
    assert [r.text for r in await book.pending()] == ["sooner", "later"]
    assert {r.id for r in await book.cancel("")} == {later.id, sooner.id}
    assert await book.pending() == []


async def test_a_reminder_due_while_the_server_was_killed_fires_when_it_is_back(
    tmp_path: Path,
) -> None:
    first = NatsServer(tmp_path / "nats")
    await first.start()
    nc = await nats.connect(first.url)
    await ensure_reminders(nc, AGENT)
    bread = reminder("take the bread out", soon(2))
    await ReminderBook(nc, AGENT).schedule(bread)
    await nc.close()
    assert first._proc is not None
    first._proc.kill()  # kill -9: no shutdown, no flush beyond what JetStream synced
    await first._proc.wait()
    await asyncio.sleep(3)  # its time passes while nothing runs

    second = NatsServer(tmp_path / "nats")
    await second.start()
    try:
        nc = await nats.connect(second.url)
        try:
            got = await fired(nc, within_s=10)
        finally:
            await nc.close()
    finally:
        await second.close()
        await first.close()
    assert [f.reminder for f in got] == [bread]


async def test_an_unreadable_stored_reminder_is_named_not_fatal(nc: NatsClient) -> None:
    book = ReminderBook(nc, AGENT)
    good = reminder("water the plants", soon(600))
    await book.schedule(good)
    await nc.jetstream().publish(
        reminder_schedule_subject(AGENT, "bad1"), json.dumps({"id": "bad1", "ttl_s": "x"}).encode()
    )
    found, unreadable = await book.read_pending()
    assert [r.id for r in found] == [good.id]
    (problem,) = unreadable
    assert "bad1" in problem and "'ttl_s'" in problem


def test_a_reminder_in_the_past_or_too_far_ahead_is_refused() -> None:
    now = datetime.now(UTC)
    with pytest.raises(NoTimeSaid, match="already passed"):
        Reminder.new(AGENT, "board", "x", now - timedelta(seconds=1), now=now)
    with pytest.raises(NoTimeSaid, match="days ahead"):
        Reminder.new(AGENT, "board", "x", now + timedelta(days=400), now=now)
    with pytest.raises(ReminderError, match="zone"):
        Reminder.new(AGENT, "board", "x", datetime(2030, 1, 1), now=now)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ([], "object"),
        ({"id": 5}, "'id'"),
        ({"id": "ab!", "ttl_s": 1}, "'id'"),
        ({"id": "ab", "ttl_s": True}, "'ttl_s'"),
        ({"id": "ab", "ttl_s": 5, "agent": "Bad Name", "device": "b"}, "agent"),
        (
            {"id": "ab", "ttl_s": 5, "agent": "a", "device": "b", "text": "t", "due": "soon"},
            "'due'",
        ),
        (
            {
                "id": "ab", "ttl_s": 5, "agent": "a", "device": "b", "text": "t",
                "due": "2030-01-01T00:00:00", "created": "2030-01-01T00:00:00+00:00",
            },
            "zone",
        ),
    ],
)  # fmt: skip
def test_a_malformed_reminder_names_its_field(payload: object, field: str) -> None:
    with pytest.raises(ReminderError, match=field):
        Reminder.from_payload(payload)


def test_a_reminder_round_trips_through_its_payload() -> None:
    r = reminder("check the oven", soon(60))
    assert Reminder.from_payload(json.loads(json.dumps(r.to_payload()))) == r
    assert Reminder.from_bytes(json.dumps(r.to_payload()).encode()) == r
    with pytest.raises(ReminderError, match="not JSON"):
        Reminder.from_bytes(b"\xff{")
