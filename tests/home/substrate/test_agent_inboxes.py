"""The agents' durable inbox consumers, made by the substrate on a real nats-server.

What the substrate decides (the consumer's settings, whether a kept one is right) is
checked as pure functions; what it does on a real JetStream server with home's event
log: an older release's consumer, or one an agent widened, is replaced without losing
what was not acked and without a byte of any other rail; one found gone is made again
from the moment it was last seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from home.substrate.agent_inboxes import (
    ACK_WAIT_S,
    AgentInboxes,
    inbox_config,
    mismatches,
    reads_inbox,
)
from home.substrate.config import EventLogConfig
from home.substrate.eventlog import ensure_stream
from home.substrate.nats_server import NatsServer
from shared.schema.catalog import NodeCatalog
from shared.subjects import agent_inbox_durable, workspace_in_subject

AGENT = "edge_asr"
DURABLE = agent_inbox_durable(AGENT)
RAIL = workspace_in_subject(AGENT)
STREAM = EventLogConfig().stream
FETCH_S = 5.0


def test_the_inbox_is_a_pull_consumer_on_the_agents_rail_alone() -> None:
    config = inbox_config(AGENT)
    assert (config.durable_name, config.filter_subject) == (DURABLE, RAIL)
    assert config.deliver_subject is None and config.ack_policy == AckPolicy.EXPLICIT
    assert config.ack_wait == ACK_WAIT_S and config.deliver_policy == DeliverPolicy.NEW
    assert mismatches(inbox_config(AGENT), config) == []


def test_a_wider_filter_or_a_push_consumer_is_not_kept() -> None:
    wanted = inbox_config(AGENT)
    widened = inbox_config(AGENT)
    widened.filter_subject = "events.>"
    assert mismatches(widened, wanted) == ["filter_subject"]
    several = inbox_config(AGENT)
    several.filter_subject, several.filter_subjects = None, [RAIL, "events.sensation.>"]
    assert mismatches(several, wanted) == ["filter_subject", "filter_subjects"]
    pushed = inbox_config(AGENT)
    pushed.deliver_subject = "_INBOX.agent.edge_asr.x"
    assert mismatches(pushed, wanted) == ["deliver_subject"]


def test_only_a_node_that_reads_its_rail_through_the_inbox_gets_one(catalog: NodeCatalog) -> None:
    assert reads_inbox(catalog[f"agent.{AGENT}"])
    assert not reads_inbox(catalog["effector.journal_append"])


@pytest.fixture
async def js_server(tmp_path: Path) -> AsyncIterator[NatsClient]:
    """A JetStream nats-server with home's event log and no consumer; yields a client."""
    server = NatsServer(tmp_path / "nats")
    await server.start()
    try:
        nc = await nats.connect(server.url)
        await ensure_stream(nc, EventLogConfig())
        try:
            yield nc
        finally:
            await nc.close()
    finally:
        await server.close()


async def fetch_all(nc: NatsClient) -> list[bytes]:
    """Everything the inbox delivers now, acked."""
    sub = await nc.jetstream().pull_subscribe_bind(DURABLE, stream=STREAM)
    got: list[bytes] = []
    try:
        while True:
            try:
                (msg,) = await sub.fetch(1, timeout=0.5)
            except TimeoutError:
                return got
            got.append(msg.data)
            await msg.ack_sync()
    finally:
        await sub.unsubscribe()


async def test_a_consumer_kept_from_an_earlier_run_is_kept(js_server: NatsClient) -> None:
    inboxes = AgentInboxes(STREAM)
    assert await inboxes.prepare(js_server, AGENT) == "made"
    await js_server.jetstream().publish(RAIL, b"waited")
    assert await AgentInboxes(STREAM).prepare(js_server, AGENT) == "kept"
    assert await fetch_all(js_server) == [b"waited"]


async def test_a_widened_consumer_is_replaced_from_its_ack_floor(js_server: NatsClient) -> None:
    """Before: the consumer was the agent's to make, and whatever filter it gave stayed."""
    js = js_server.jetstream()
    widened = ConsumerConfig(
        name=DURABLE, durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT,
        filter_subject="events.>",
    )  # fmt: skip
    await js.add_consumer(STREAM, widened)
    await js.publish(RAIL, b"one")
    await js.publish("events.sensation.tui.turn", b"another device's turn")
    await js.publish(RAIL, b"two")
    sub = await js.pull_subscribe_bind(DURABLE, stream=STREAM)
    (first,) = await sub.fetch(1, timeout=FETCH_S)
    await first.ack_sync()  # acked: not delivered again
    await sub.unsubscribe()

    inboxes = AgentInboxes(STREAM)
    assert await inboxes.prepare(js_server, AGENT) == "replaced"
    assert inboxes.replaced == 1
    info = await js.consumer_info(STREAM, DURABLE)
    assert info.config.filter_subject == RAIL
    assert await fetch_all(js_server) == [b"two"]


async def test_a_push_consumer_of_an_older_release_is_replaced(js_server: NatsClient) -> None:
    js = js_server.jetstream()
    older = ConsumerConfig(
        durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT, filter_subject=RAIL,
        deliver_subject="_INBOX.agent.edge_asr.old", ack_wait=ACK_WAIT_S,
    )  # fmt: skip
    await js.add_consumer(STREAM, older)
    await js.publish(RAIL, b"unread")
    assert await AgentInboxes(STREAM).prepare(js_server, AGENT) == "replaced"
    assert (await js.consumer_info(STREAM, DURABLE)).config.deliver_subject is None
    assert await fetch_all(js_server) == [b"unread"]


async def test_a_consumer_gone_with_the_event_log_is_made_again(js_server: NatsClient) -> None:
    js = js_server.jetstream()
    inboxes = AgentInboxes(STREAM)
    await inboxes.prepare(js_server, AGENT)
    assert await inboxes.check(js_server, [AGENT]) == []
    await js.delete_stream(STREAM)
    await ensure_stream(js_server, EventLogConfig())
    await js.publish(RAIL, b"while it was gone")
    assert await inboxes.check(js_server, [AGENT]) == [AGENT]
    assert inboxes.recreated == 1
    assert (await js.consumer_info(STREAM, DURABLE)).config.filter_subject == RAIL
    # Made again from when it was last seen: what came since is delivered.
    assert await fetch_all(js_server) == [b"while it was gone"]
