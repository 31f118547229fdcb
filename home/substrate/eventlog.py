"""The event log: a JetStream stream recording ``events.>``, and reading it back.

The stream is bounded by size and age (:class:`~home.substrate.config.EventLogConfig`).
:func:`read_log` replays it in arrival order, filtered by subject and/or
``binding_id``, and optionally follows new events; :func:`trace` collects one
turn across every subject it touched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from home.substrate.config import EventLogConfig
from shared.errors import ContractError
from shared.event import Event
from shared.messages.fields import words_and_rest
from shared.subjects import EVENTS_PATTERN

EVENTS_SUBJECT = EVENTS_PATTERN
# With nothing pending, a replay (not a follow) ends after this long without a message.
IDLE_END_S = 0.5


async def ensure_stream(nc: NatsClient, config: EventLogConfig, replicas: int = 1) -> None:
    """Create the stream, or update its bounds if it exists.

    ``replicas`` is a floor: a stream already replicated wider (by a cluster's
    members, docs/architecture.md "Growing past one machine") keeps its replicas.
    """
    js = nc.jetstream()
    stream = StreamConfig(
        name=config.stream,
        subjects=[EVENTS_SUBJECT],
        max_bytes=config.max_bytes,
        max_age=config.max_age_s,
        storage=StorageType.FILE,
        num_replicas=replicas,
    )
    try:
        info = await js.stream_info(config.stream)
    except NotFoundError:
        await js.add_stream(stream)
    else:
        stream.num_replicas = max(replicas, info.config.num_replicas or 1)
        await js.update_stream(stream)


async def stream_stats(nc: NatsClient, stream: str) -> dict[str, Any]:
    """Messages, bytes and sequence range of the stream."""
    info = await nc.jetstream().stream_info(stream)
    state = info.state
    return {
        "stream": stream,
        "messages": state.messages,
        "bytes": state.bytes,
        "first_seq": state.first_seq,
        "last_seq": state.last_seq,
    }


@dataclass(frozen=True)
class LoggedEvent:
    """One recorded message: where and when it arrived, and the event if it parsed."""

    seq: int
    time: datetime
    subject: str
    event: Event | None
    raw: str
    error: str | None = None

    @property
    def binding_id(self) -> str | None:
        """The event's binding_id, if it parsed and has one."""
        return self.event.binding_id if self.event is not None else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        body: Any = self.event.to_dict() if self.event is not None else self.raw
        return {
            "seq": self.seq,
            "time": self.time.isoformat(),
            "subject": self.subject,
            "event": body,
            "error": self.error,
        }


def _logged(seq: int, time: datetime, subject: str, data: bytes) -> LoggedEvent:
    raw = data.decode("utf-8", errors="replace")
    try:
        return LoggedEvent(seq, time, subject, Event.from_json(data), raw)
    except ContractError as exc:
        return LoggedEvent(seq, time, subject, None, raw, str(exc))


def _touches(logged: LoggedEvent, binding_id: str) -> bool:
    return logged.binding_id == binding_id or binding_id in logged.subject.split(".")


async def read_log(
    nc: NatsClient,
    stream: str,
    *,
    subject: str = EVENTS_SUBJECT,
    binding_id: str | None = None,
    follow: bool = False,
    since: datetime | None = None,
) -> AsyncIterator[LoggedEvent]:
    """Replay the stream from its start, or from ``since`` (then follow, if asked), filtered."""
    js = nc.jetstream()
    if since is None:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
    else:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since)
    sub = await js.subscribe(subject, stream=stream, ordered_consumer=True, config=config)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=None if follow else IDLE_END_S)
            except (NatsTimeout, TimeoutError):
                if follow:
                    continue
                return
            meta = msg.metadata
            logged = _logged(meta.sequence.stream, meta.timestamp, msg.subject, msg.data)
            if binding_id is None or _touches(logged, binding_id):
                yield logged
            if not follow and meta.num_pending == 0:
                return
    finally:
        await sub.unsubscribe()


async def trace(nc: NatsClient, stream: str, binding_id: str) -> list[LoggedEvent]:
    """Every recorded event of one turn, in arrival order.

    The turn's first event is usually published without a binding_id (the
    router mints it and delivers the same ``event_id`` onwards), so an unbound
    event whose ``event_id`` reappears in the turn belongs to it too.
    """
    turn: list[LoggedEvent] = []
    unbound: dict[str, LoggedEvent] = {}
    async for logged in read_log(nc, stream):
        if _touches(logged, binding_id):
            turn.append(logged)
        elif logged.event is not None and logged.event.binding_id is None:
            unbound[logged.event.event_id] = logged
    ids = {item.event.event_id for item in turn if item.event is not None}
    turn.extend(item for event_id, item in unbound.items() if event_id in ids)
    return sorted(turn, key=lambda item: item.seq)


def event_summary(logged: LoggedEvent) -> str:
    """One line of what an event says: its type, source and text, if any."""
    if logged.event is None:
        return f"unparseable: {logged.error}"
    event = logged.event
    text, extra = words_and_rest(event.payload)
    said = f" {json.dumps(text, ensure_ascii=False)[:80]}" if text is not None else ""
    rest = f" {json.dumps(extra, ensure_ascii=False)[:80]}" if extra else ""
    return f"{event.event_type} from {event.source}{said}{rest}"
