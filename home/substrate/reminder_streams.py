"""Each reminding agent's reminders stream and the consumer its node reads, made by the
substrate (as the agents' inboxes are: the node only reads and acks).

An agent keeps reminders when its catalog config says ``intents: true`` (its node runs
the intent step, ``home/agents/verb_desk.py``). Its stream ``REMINDERS_<agent>`` holds
``reminders.schedule.<agent>.*`` (a reminder waiting, as a one-shot scheduled message)
and ``reminders.due.<agent>.*`` (where nats-server publishes it at its time); schedules,
rollups (cancelling) and per-message TTLs are on. What goes into it is
``home/reminders/book.py``'s; docs/architecture.md "Reminders".
"""

from __future__ import annotations

from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from shared.schema import NodeSpec
from shared.subjects import (
    reminder_due_subject,
    reminder_schedule_subject,
    reminders_durable,
    reminders_stream,
)

# Reminders are a few a day per household; the bound only stops a runaway writer.
MAX_BYTES = 64 * 1024 * 1024
# A fired reminder is redelivered after this long unacked (its node died saying it).
DUE_ACK_WAIT_S = 30.0


def keeps_reminders(spec: NodeSpec) -> bool:
    """Whether ``spec``'s agent runs the intent step and so keeps reminders."""
    return spec.agent is not None and spec.config.get("intents") is True


def stream_config(agent: str, replicas: int = 1) -> StreamConfig:
    """``agent``'s reminders stream."""
    return StreamConfig(
        name=reminders_stream(agent),
        subjects=[reminder_schedule_subject(agent), reminder_due_subject(agent)],
        storage=StorageType.FILE,
        max_bytes=MAX_BYTES,
        num_replicas=replicas,
        allow_msg_schedules=True,
        allow_rollup_hdrs=True,
        allow_msg_ttl=True,
    )


def due_consumer_config(agent: str) -> ConsumerConfig:
    """The pull consumer ``agent``'s node reads its fired reminders through."""
    durable = reminders_durable(agent)
    return ConsumerConfig(
        name=durable,
        durable_name=durable,
        filter_subject=reminder_due_subject(agent),
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=DUE_ACK_WAIT_S,
        deliver_policy=DeliverPolicy.ALL,
    )


async def ensure_reminders(nc: NatsClient, agent: str, replicas: int = 1) -> None:
    """Make ``agent``'s stream (or bring it to these settings, its replicas a floor) and
    its consumer of fired reminders (kept as it is when there: it holds what is unsaid)."""
    js = nc.jetstream()
    wanted = stream_config(agent, replicas)
    stream = reminders_stream(agent)
    try:
        info = await js.stream_info(stream)
    except NotFoundError:
        await js.add_stream(wanted)
    else:
        wanted.num_replicas = max(replicas, info.config.num_replicas or 1)
        await js.update_stream(wanted)
    try:
        await js.consumer_info(stream, reminders_durable(agent))
    except NotFoundError:
        await js.add_consumer(stream, due_consumer_config(agent))
