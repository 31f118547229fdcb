"""An agent's inbound rail as a durable JetStream consumer, so no utterance falls between processes.

Core NATS delivers a routed utterance only to a subscriber that exists at that
instant: one routed while the node restarts, or queued in a node that is then
killed, is gone. Home's event log already stores every ``events.>`` message in a
JetStream stream, so the node reads its rail through a durable pull consumer on
that stream instead:

- the consumer outlives the node process: what arrives while no node runs waits
  in the stream and is fetched by the next one;
- the substrate makes the consumer, with its filter, before the node starts
  (``home/substrate/agent_inboxes.py``); the node only looks it up, fetches from it
  and acks, which is all its bus user may do: a consumer's maker chooses its filter;
- a message is acked only when its turn is over (answered, failed or refused), and
  a message still queued or in flight is kept alive with ``in_progress`` every
  :data:`KEEPALIVE_S`, so the consumer's ack wait can stay short: a node that dies
  has its unfinished messages redelivered within seconds, not minutes;
- a node that stops cleanly hands back what it has not started (``nak``).

Delivery is at least once: a node killed between a turn's answer and its ack
answers it again in the next life. The envelope TTL bounds the other side: a
redelivered utterance past its TTL is refused as stale rather than answered late.

The consumer lives inside the stream: deleting the stream (any local client can
send ``$JS.API.STREAM.DELETE.EVENTS``) deletes it too. The substrate's health check
makes both again; the inbox checks its consumer every :data:`CHECK_S`, logs the
outage, keeps fetching, and counts the consumer's return.

With no stream over the rail (a bare nats-server, as in some tests), the inbox
falls back to a core subscription and says so in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Literal

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from home.agents.errors import InboxMissing
from shared.lifecycle import cancel_and_wait
from shared.subjects import agent_inbox_durable

log = logging.getLogger(__name__)

# Well inside the consumer's ack wait (home/substrate/agent_inboxes.py ACK_WAIT_S).
KEEPALIVE_S = 5.0
# How often the durable consumer is checked for existence (home's health interval).
CHECK_S = 1.0
# How long one fetch waits for a message before it asks again.
FETCH_S = 5.0
Settle = Literal["ack", "nak", "term"]
PullSubscription = JetStreamContext.PullSubscription


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
    """The rail's subscription; on a durable rail also the fetch loop, the keepalive of
    every message not yet settled, and the watch of the consumer."""

    def __init__(
        self, sub: Subscription | PullSubscription, durable: DurableRail | None = None
    ) -> None:
        self.sub = sub
        self.rail = durable
        self.durable = durable is not None
        # Times the consumer was found gone and then back (made again by the substrate).
        self.recreated = 0
        self._gone = False
        self._open: dict[int, Msg] = {}
        self._tasks: list[asyncio.Task[None]] = []
        if durable is not None and isinstance(sub, PullSubscription):
            self._tasks.append(asyncio.create_task(self._pull(sub, durable), name="inbox-pull"))
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

    async def _pull(self, sub: PullSubscription, rail: DurableRail) -> None:
        """Fetch one message at a time and hand each to the rail's callback, in order."""
        while True:
            try:
                msgs = await sub.fetch(1, timeout=FETCH_S)
            except TimeoutError:
                continue
            except NatsError as exc:
                # The consumer is gone (the substrate makes it again) or the connection
                # is down (it reconnects by itself): ask again shortly.
                log.debug("inbox: fetch from %s failed: %r", rail.durable, exc)
                await asyncio.sleep(CHECK_S)
                continue
            self._back(rail)
            for msg in msgs:
                await rail.cb(msg)

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(KEEPALIVE_S)
            for msg in list(self._open.values()):
                with contextlib.suppress(NatsError):
                    await msg.in_progress()

    async def _watch(self, rail: DurableRail) -> None:
        while True:
            await asyncio.sleep(CHECK_S)
            try:
                await rail.exists()
            except NotFoundError:
                if not self._gone:
                    log.warning(
                        "inbox: durable %s is gone (event log deleted?); the substrate makes "
                        "it again", rail.durable,
                    )  # fmt: skip
                self._gone = True
                continue
            except (NatsError, TimeoutError) as exc:
                log.warning("inbox: cannot check %s: %r", rail.durable, exc)
                continue
            self._back(rail)

    def _back(self, rail: DurableRail) -> None:
        """The consumer is there (again): count its return once."""
        if self._gone:
            self._gone = False
            self.recreated += 1
            log.warning("inbox: durable %s is back; reading it again", rail.durable)

    async def close(self) -> None:
        """Stop fetching, the keepalive and the watch, and unsubscribe; unsettled messages
        redeliver after the consumer's ack wait."""
        await cancel_and_wait(*self._tasks)
        with contextlib.suppress(NatsError):
            await self.sub.unsubscribe()


class DurableRail:
    """One agent's durable consumer as the substrate made it: looked up and fetched from,
    never made or changed here."""

    def __init__(self, nc: NatsClient, stream: str, subject: str, agent: str, cb: Callback) -> None:
        self.nc = nc
        self.stream = stream
        self.subject = subject
        self.durable = durable_name(agent)
        self.cb = cb

    async def exists(self) -> None:
        """Raise ``NotFoundError`` when the consumer (or its stream) is gone."""
        await self.nc.jetstream().consumer_info(self.stream, self.durable)

    async def bind(self) -> PullSubscription:
        """A pull subscription on the consumer; its deliveries come to the node's own
        inbox prefix, where only it may subscribe."""
        return await self.nc.jetstream().pull_subscribe_bind(self.durable, stream=self.stream)


async def open_inbox(nc: NatsClient, subject: str, agent: str, cb: Callback) -> Inbox:
    """Read ``subject`` through the agent's durable consumer, or plainly without a stream.

    Raises :class:`InboxMissing` when the stream is there but the consumer is not: the
    substrate makes it before it starts the node, and the node may not make one.
    """
    js = nc.jetstream()
    try:
        stream = await js.find_stream_name_by_subject(subject)
    except (NotFoundError, NatsError) as exc:
        log.warning("inbox: no JetStream stream holds %s (%s); core delivery only", subject, exc)
        return Inbox(await nc.subscribe(subject, cb=cb))
    rail = DurableRail(nc, stream, subject, agent, cb)
    try:
        await rail.exists()
    except NotFoundError as exc:
        raise InboxMissing(
            f"no durable consumer {rail.durable} on stream {stream} for {subject}: the "
            f"substrate makes it before it starts the node ({exc})"
        ) from exc
    sub = await rail.bind()
    log.info("inbox: %s through durable %s on stream %s", subject, rail.durable, stream)
    return Inbox(sub, rail)
