"""Home speaks first: an agent node says each of its reminders when nats-server fires it.

The node reads its fired reminders (:mod:`home.reminders.book`) through the durable
consumer the substrate made, one at a time. Each is spoken to the device that asked,
as a speak of its own binding id (no turn asked for it), with the reminder's TTL as
the event's: the bridge holds it while the board is away and delivers it if the board
comes back in time. The message is settled once the device acks the speech; no ack
within the TTL, or a reminder read only after its TTL, is reported missed on the
device's reply rail. A node that dies before the ack leaves the message unsettled,
and its next life says it again (docs/architecture.md "Reminders").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.client import JetStreamContext

from home.agents.answers import AgentPublisher
from home.reminders.book import Fired, Reminder
from shared.event import new_binding_id
from shared.lifecycle import cancel_and_wait
from shared.messages.voice import Reply, Speak
from shared.subjects import (
    reminders_durable,
    reminders_stream,
    reply_subject,
    speak_subject,
    speech_completed_subject,
)

log = logging.getLogger(__name__)

FETCH_S = 5.0
# Well inside the consumer's ack wait (home/reminders/book.py DUE_ACK_WAIT_S).
KEEPALIVE_S = 10.0
# A board that is there acks within this; a reminder not acked by then waits for its TTL.
MIN_WAIT_S = 30.0


@dataclass
class ReminderStats:
    """Reminders said (acked by the device), missed, and unreadable."""

    said: int = 0
    missed: int = 0
    unreadable: int = 0


class DueReminders:
    """Reads one agent's fired reminders and says each on its device."""

    def __init__(
        self,
        agent: str,
        publisher: AgentPublisher,
        clock: Callable[[], datetime] = lambda: datetime.now().astimezone(),
    ) -> None:
        self.agent = agent
        self.publisher = publisher
        self.clock = clock
        self.stats = ReminderStats()
        self._nc: NatsClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._reader: asyncio.Task[None] | None = None

    async def start(self, nc: NatsClient) -> None:
        """Bind to the agent's consumer of fired reminders and start reading it."""
        self._nc = nc
        js = nc.jetstream()
        sub = await js.pull_subscribe_bind(
            reminders_durable(self.agent), stream=reminders_stream(self.agent)
        )
        self._reader = asyncio.create_task(self._read(js, sub), name=f"{self.agent}-reminders")

    async def close(self) -> None:
        """Stop reading; reminders still waiting for their ack are said again next life."""
        tasks = [t for t in (self._reader, *self._tasks) if t is not None]
        await cancel_and_wait(*tasks)
        self._tasks.clear()
        self._reader = None

    async def _read(self, js: JetStreamContext, sub: JetStreamContext.PullSubscription) -> None:
        while True:
            try:
                msgs = await sub.fetch(1, timeout=FETCH_S)
            except TimeoutError:
                continue
            except NatsError as exc:
                log.debug("%s: fetching fired reminders failed: %r", self.agent, exc)
                await asyncio.sleep(FETCH_S)
                continue
            for msg in msgs:
                task = asyncio.create_task(self._fired(msg))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _fired(self, msg: Msg) -> None:
        try:
            await self._settle(msg)
        except NatsError as exc:  # unsettled: redelivered after the consumer's ack wait
            log.warning("%s: a fired reminder could not be said or settled: %r", self.agent, exc)

    async def _settle(self, msg: Msg) -> None:
        fired = Fired.read(msg)
        reminder = fired.reminder
        if reminder is None:
            self.stats.unreadable += 1
            log.warning("%s: an unreadable fired reminder, dropped: %s", self.agent, fired.error)
            with contextlib.suppress(NatsError):
                await msg.term()
            return
        left_s = (reminder.expires() - self.clock()).total_seconds()
        if left_s <= 0 or not await self._say(msg, reminder, left_s):
            await self._missed(reminder)
        else:
            self.stats.said += 1
        with contextlib.suppress(NatsError):
            await msg.ack()

    async def _say(self, msg: Msg, reminder: Reminder, left_s: float) -> bool:
        """Speak ``reminder``; True once the device acks it within ``left_s``."""
        assert self._nc is not None
        binding_id = new_binding_id()
        acks = await self._nc.subscribe(speech_completed_subject(binding_id))
        keepalive = asyncio.create_task(_keep_alive(msg))
        try:
            event = Speak(reminder.spoken(), self.agent, reminder.device, False).to_event(
                **self.publisher.stamp(binding_id=binding_id), ttl_ms=int(left_s * 1000)
            )
            await self.publisher.send(speak_subject(self.agent, reminder.device), event)
            log.info("%s: reminder %s said to %s (binding %s)", self.agent, reminder.id,
                     reminder.device, binding_id)  # fmt: skip
            await acks.next_msg(timeout=max(left_s, MIN_WAIT_S))
        except TimeoutError:
            return False
        finally:
            await cancel_and_wait(keepalive)
            with contextlib.suppress(NatsError):
                await acks.unsubscribe()
        return True

    async def _missed(self, reminder: Reminder) -> None:
        self.stats.missed += 1
        due = reminder.due.astimezone(self.clock().tzinfo).strftime("%Y-%m-%d %H:%M")
        why = f"missed: due at {due}, not heard within {reminder.ttl_s:g} s"
        log.warning("%s: reminder %s for %s %s", self.agent, reminder.id, reminder.device, why)
        reply = Reply(reminder.spoken(), spoken=False, kind="missed", reason=why, agent=self.agent)
        await self.publisher.publish(
            reply_subject(self.agent, reminder.device), reply, binding_id=reminder.binding_id
        )


async def _keep_alive(msg: Msg) -> None:
    while True:
        await asyncio.sleep(KEEPALIVE_S)
        with contextlib.suppress(NatsError):
            await msg.in_progress()
