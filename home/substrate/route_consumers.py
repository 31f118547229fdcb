"""Each delivering binding's durable consumer on the event log: where its routing stands.

The router reads a binding's subject (``route.from_``) from the event log through a
durable pull consumer, and acks each event once it is routed (delivered, held for the
right room, or dropped with a counted reason). The consumer's acknowledged position
is the engine's own record of what was routed, replicated with the log on a
clustered home (docs/architecture.md "Growing past one machine"): whoever routes
the schema next (this home after a restart or a kill -9, a member that adopts a lost
one's schemas, a fenced member that renews) binds the same consumer and goes on from
there, with no clock and no margin.

- a consumer made now delivers from the moment its schema was applied (or, made
  again after it was found gone, from the moment it was last seen): a schema applied
  for the first time does not route the log's past;
- a kept consumer whose settings are not these (another filter, say) is replaced,
  delivering again from its ack floor, so nothing unrouted is lost;
- a schema unapplied by its user forgets its consumers; one stopped by its home, a
  fence or another member's claim keeps them.

The decisions (:func:`route_durable`, :func:`route_config`) are pure.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from datetime import datetime

from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from home.substrate.agent_inboxes import INACTIVE_S, Start, mismatches, starting
from home.substrate.routing import Route

log = logging.getLogger(__name__)

# An event taken but not acked (its router died routing it) is delivered again after
# this: a router acks each event as soon as it has routed it.
ACK_WAIT_S = 10.0
# Events a router may hold unacked: the room window's worth and more.
MAX_ACK_PENDING = 256
# Deliveries after which an event whose routing keeps killing its home is given up.
MAX_DELIVER = 5


def route_durable(route: Route) -> str:
    """The consumer's name: the schema, the binding's subject and its node, hashed
    (subjects hold characters a consumer name may not)."""
    key = "\0".join((route.schema, route.from_, route.node))
    return f"route_{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def route_config(route: Route, start: Start = None) -> ConsumerConfig:
    """The pull consumer ``route`` is routed through: new events only, or from a moment
    (a datetime) or a stream sequence (an int) on."""
    durable = route_durable(route)
    config = ConsumerConfig(
        name=durable,
        durable_name=durable,
        description=f"routes {route.from_} to {route.node} for schema {route.schema}",
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ACK_WAIT_S,
        max_deliver=MAX_DELIVER,
        max_ack_pending=MAX_ACK_PENDING,
        deliver_policy=DeliverPolicy.NEW,
        filter_subject=route.from_,
        inactive_threshold=INACTIVE_S,
    )
    return starting(config, start)


async def prepare(nc: NatsClient, stream: str, route: Route, since: datetime | None = None) -> str:
    """Make ``route``'s consumer (delivering from ``since``, else new events only), keep
    it, or replace one whose settings are not ours: ``"made"``, ``"kept"`` or
    ``"replaced"``."""
    js = nc.jetstream()
    durable = route_durable(route)
    wanted = route_config(route)
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        await js.add_consumer(stream, route_config(route, since))
        return "made"
    wrong = mismatches(info.config, wanted)
    if not wrong:
        return "kept"
    floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
    log.warning(
        "router: %s on %s differs in %s; replacing it, from stream sequence %d",
        durable, stream, ", ".join(wrong), floor + 1,
    )  # fmt: skip
    await js.delete_consumer(stream, durable)
    await js.add_consumer(stream, route_config(route, floor + 1))
    return "replaced"


async def forget(nc: NatsClient, stream: str, route: Route) -> None:
    """Delete ``route``'s consumer (gone already is fine)."""
    with contextlib.suppress(NotFoundError):
        await nc.jetstream().delete_consumer(stream, route_durable(route))
