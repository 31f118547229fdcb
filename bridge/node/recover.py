"""After a crash: which events did the killed run publish on local NATS but not commit?

A receiving side commits the ids it delivered shortly after publishing them
(before acknowledging them), so a ``kill -9`` in between leaves events that
reached the local bus but not the dedupe window; the peer resends them. When the
side's nats-server records those subjects in a JetStream stream (home's event log
under ``home up``), the stream says which of them arrived: this reads it from
just before the last commit, and those ids join the dedupe window. Without such a
stream the window is at-least-once (docs/architecture.md, "Bridge: the durable outbox").
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import Error as JetStreamError

from shared.errors import TetherError
from shared.event import Event

log = logging.getLogger("tether.bridge")

# Read the stream from this long before the last commit: events published between
# the commit's snapshot and its write are in doubt too.
MARGIN_S = 2.0
IDLE_END_S = 0.5


async def delivered_since(nc: NATS, subjects: tuple[str, ...], since: float) -> dict[str, float]:
    """Event ids (with expiry) local NATS recorded on ``subjects`` since ``since`` (wall clock).

    Empty when no JetStream stream records a subject, or this connection may not ask
    (nothing to learn, not an error).
    """
    js = nc.jetstream(timeout=1.0)
    found: dict[str, float] = {}
    start = datetime.fromtimestamp(since - MARGIN_S, UTC)
    for subject in subjects:
        try:
            stream = await js.find_stream_name_by_subject(subject)
        except (NatsTimeout, TimeoutError):
            # No answer: this connection may not use JetStream (on home under bus
            # authorization, a device's bridge user may not read the event log).
            log.info("JetStream does not answer on %s: nothing to look up", subject)
            break
        except (NatsError, JetStreamError):
            continue  # no JetStream here, or no stream records the subject
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=start)
        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True, config=config)
        before = len(found)
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=IDLE_END_S)
                except (NatsTimeout, TimeoutError):
                    break
                try:
                    event = Event.from_json(msg.data)
                except TetherError:
                    continue  # not an envelope: nothing this bridge delivered
                found[event.event_id] = event.expires_at.timestamp()
                if msg.metadata.num_pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        log.info(
            "%d event(s) on %s in stream %s since the last commit",
            len(found) - before,
            subject,
            stream,
        )
    return found
