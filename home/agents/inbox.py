"""An agent's inbound rail as a durable JetStream consumer, so no utterance falls between processes.

Core NATS delivers a routed utterance only to a subscriber that exists at that
instant: one routed while the node restarts, or queued in a node that is then
killed, is gone. Home's event log already stores every ``events.>`` message in a
JetStream stream, so the node reads its rail through a durable consumer on that
stream instead:

- the consumer outlives the node process: what arrives while no node runs waits
  in the stream and is delivered to the next one;
- a message is acked only when its turn is over (answered, failed or refused), and
  a message still queued or in flight is kept alive with ``in_progress`` every
  :data:`KEEPALIVE_S`, so :data:`ACK_WAIT_S` can stay short: a node that dies
  has its unfinished messages redelivered within seconds, not minutes;
- a node that stops cleanly hands back what it has not started (``nak``).

Delivery is at least once: a node killed between a turn's answer and its ack
answers it again in the next life. The envelope TTL bounds the other side: a
redelivered utterance past its TTL is refused as stale rather than answered late.

The consumer lives inside the stream: deleting the stream (any local client can
send ``$JS.API.STREAM.DELETE.EVENTS``) deletes it too, and the rail goes quiet
while the subscription looks fine. So the inbox checks its consumer every
:data:`CHECK_S`; when it is gone, it subscribes again once the stream is back
(the substrate remakes it at its next health check), delivering from the last
moment the consumer was seen, and counts the recreation.

With no stream over the rail (a bare nats-server, as in some tests), the inbox
falls back to a core subscription and says so in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Literal

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from shared.lifecycle import cancel_and_wait
from shared.subjects import agent_inbox_durable

log = logging.getLogger(__name__)

ACK_WAIT_S = 15.0
KEEPALIVE_S = 5.0
# Redeliveries after which a message that keeps killing its node is given up.
MAX_DELIVER = 4
INACTIVE_S = 24 * 3600.0
# How often the durable consumer is checked for existence (home's health interval).
CHECK_S = 1.0
Settle = Literal["ack", "nak", "term"]


def durable_name(agent: str) -> str:
    """The consumer's name: one per agent, shared by every life of its node."""
    return agent_inbox_durable(agent)


def is_stream_message(msg: Msg) -> bool:
    """Whether ``msg`` came through a JetStream consumer (and so must be settled)."""
    return bool(msg.reply) and msg.reply.startswith("$JS.ACK.")


async def settle(msg: Msg, how: Settle) -> None:
    """Ack, nak or terminate a stream message; a core message needs nothing.

    A settle that fails (the connection is gone) is logged: the server redelivers
    after ``ack_wait``, which is the safe side.
    """
    if not is_stream_message(msg):
        return
    try:
        if how == "ack":
            await msg.ack()
        elif how == "nak":
            await msg.nak()
        else:
            await msg.term()
    except NatsError as exc:
        log.warning("inbox: %s of %s failed: %s", how, msg.subject, exc)


Callback = Callable[[Msg], Awaitable[None]]


class Inbox:
    """The rail's subscription, the keepalive of every message not yet settled, and the
    watch that recreates a durable consumer deleted under it."""

    def __init__(self, sub: Subscription, durable: DurableRail | None = None) -> None:
        self.sub = sub
        self.rail = durable
        self.durable = durable is not None
        # Times the consumer was found gone and made again.
        self.recreated = 0
        self._open: dict[int, Msg] = {}
        self._tasks: list[asyncio.Task[None]] = []
        if durable is not None:
            self._tasks.append(asyncio.create_task(self._keep_alive(), name="inbox-keepalive"))
            self._tasks.append(asyncio.create_task(self._watch(durable), name="inbox-watch"))

    def hold(self, msg: Msg) -> None:
        """Keep ``msg`` alive until :meth:`done` settles it."""
        if is_stream_message(msg):
            self._open[id(msg)] = msg

    async def done(self, msg: Msg, how: Settle = "ack") -> None:
        """Settle ``msg`` and stop keeping it alive."""
        self._open.pop(id(msg), None)
        await settle(msg, how)

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(KEEPALIVE_S)
            for msg in list(self._open.values()):
                with contextlib.suppress(NatsError):
                    await msg.in_progress()

    async def _watch(self, rail: DurableRail) -> None:
        seen_at = datetime.now(UTC)
        while True:
            await asyncio.sleep(CHECK_S)
            try:
                await rail.exists()
                seen_at = datetime.now(UTC)
                continue
            except NotFoundError:
                pass
            except (NatsError, TimeoutError) as exc:
                log.warning("inbox: cannot check %s: %r", rail.durable, exc)
                continue
            try:
                sub = await rail.subscribe(since=seen_at)
            except (NotFoundError, NatsError, TimeoutError) as exc:
                # The stream is not back yet: the substrate remakes it; try again next time.
                log.warning("inbox: %s is gone and cannot be made yet: %r", rail.durable, exc)
                continue
            old, self.sub = self.sub, sub
            with contextlib.suppress(NatsError):
                await old.unsubscribe()
            self.recreated += 1
            log.warning(
                "inbox: durable %s was gone (event log deleted?); recreated from %s",
                rail.durable, seen_at.isoformat(),
            )  # fmt: skip

    async def close(self) -> None:
        """Stop the keepalive and the watch, and unsubscribe; unsettled messages
        redeliver after ack_wait."""
        await cancel_and_wait(*self._tasks)
        with contextlib.suppress(NatsError):
            await self.sub.unsubscribe()


class DurableRail:
    """How one agent's durable consumer is made, so it can be made again."""

    def __init__(
        self,
        nc: NatsClient,
        stream: str,
        subject: str,
        agent: str,
        cb: Callback,
        *,
        ack_wait_s: float,
    ) -> None:
        self.nc = nc
        self.stream = stream
        self.subject = subject
        self.durable = durable_name(agent)
        self.cb = cb
        self.config = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait_s,
            max_deliver=MAX_DELIVER,
            # The first life starts at now; later lives resume where the last one stopped.
            deliver_policy=DeliverPolicy.NEW,
            filter_subject=subject,
            # An agent no schema runs any more leaves no consumer behind for long.
            inactive_threshold=INACTIVE_S,
        )

    async def exists(self) -> None:
        """Raise ``NotFoundError`` when the consumer (or its stream) is gone."""
        await self.nc.jetstream().consumer_info(self.stream, self.durable)

    async def subscribe(self, since: datetime | None = None) -> Subscription:
        """Subscribe through the durable consumer, creating it if needed; a consumer made
        again delivers what the stream holds from ``since`` on."""
        config = self.config
        if since is not None:
            config = replace(
                config, deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since
            )
        return await self.nc.jetstream().subscribe(
            self.subject,
            durable=self.durable,
            stream=self.stream,
            cb=self.cb,
            manual_ack=True,
            config=config,
        )


async def open_inbox(
    nc: NatsClient,
    subject: str,
    agent: str,
    cb: Callback,
    *,
    ack_wait_s: float | None = None,
) -> Inbox:
    """Subscribe ``subject`` through the agent's durable consumer, or plainly without a stream.

    ``ack_wait_s`` (default :data:`ACK_WAIT_S`) applies when the consumer is created.
    """
    js = nc.jetstream()
    try:
        stream = await js.find_stream_name_by_subject(subject)
    except (NotFoundError, NatsError) as exc:
        log.warning("inbox: no JetStream stream holds %s (%s); core delivery only", subject, exc)
        return Inbox(await nc.subscribe(subject, cb=cb))
    wait = ack_wait_s if ack_wait_s is not None else ACK_WAIT_S
    rail = DurableRail(nc, stream, subject, agent, cb, ack_wait_s=wait)
    sub = await rail.subscribe()
    log.info("inbox: %s through durable %s on stream %s", subject, rail.durable, stream)
    return Inbox(sub, rail)
