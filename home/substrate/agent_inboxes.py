"""Each agent's durable inbox consumer, made by the substrate and never by the agent.

An agent node reads its rail ``events.workspace.<agent>.in`` through a durable pull
consumer on the event log (``home/agents/inbox.py``). Whoever makes a consumer
chooses its filter: an agent that could make its own could filter it on any rail
(other devices' turns, other agents' speech, the whole log) and read that through
its private inbox. So the agent's bus user may only look its consumer up, fetch
from it and ack (``home/substrate/bus_auth.py``), and the substrate makes it, on its
own connection (docs/architecture.md "Security"):

- before the node's first start (:meth:`AgentInboxes.prepare`): a consumer kept from
  an earlier run is kept as it is, so what waited for the agent is delivered; one
  whose settings are not these (a push consumer of an older release, another filter)
  is replaced, delivering again from its ack floor, so nothing unacked is lost;
- at every health check (:meth:`AgentInboxes.check`): a consumer found gone (deleting
  the event log deletes its consumers) is made again, delivering what the stream
  holds from the moment it was last seen.

The decisions (:func:`inbox_config`, :func:`mismatches`) are pure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from nats.aio.client import Client as NatsClient
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from shared.schema import NodeSpec
from shared.subjects import agent_inbox_durable, workspace_in_subject

log = logging.getLogger(__name__)

# The agent keeps a message it has not settled alive well inside this (its keepalive),
# so a node that dies has its unfinished turns redelivered within seconds.
ACK_WAIT_S = 15.0
# Redeliveries after which a message that keeps killing its node is given up.
MAX_DELIVER = 4
# An agent no schema runs any more leaves no consumer behind for long.
INACTIVE_S = 24 * 3600.0
# Node kinds that read their rail through the durable inbox (τ's builtin nats_bus,
# kind tau_bus_agent, subscribes the rail itself).
INBOX_KINDS = frozenset({"tau_agent"})
# What a kept consumer must agree on with the one the substrate would make.
COMPARED = (
    "filter_subject",
    "filter_subjects",
    "deliver_subject",
    "deliver_group",
    "ack_policy",
    "ack_wait",
    "max_deliver",
    "inactive_threshold",
)

# Where a consumer made now starts: new messages only, the stream's messages from a
# moment on, or from a stream sequence on.
Start = datetime | int | None


def reads_inbox(spec: NodeSpec) -> bool:
    """Whether ``spec``'s node reads its rail through a durable inbox the substrate makes."""
    return spec.agent is not None and spec.kind in INBOX_KINDS


def inbox_config(
    agent: str, *, ack_wait_s: float = ACK_WAIT_S, start: Start = None
) -> ConsumerConfig:
    """The pull consumer ``agent`` reads ``events.workspace.<agent>.in`` through."""
    durable = agent_inbox_durable(agent)
    config = ConsumerConfig(
        name=durable,
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        max_deliver=MAX_DELIVER,
        deliver_policy=DeliverPolicy.NEW,
        filter_subject=workspace_in_subject(agent),
        inactive_threshold=INACTIVE_S,
    )
    return starting(config, start)


def starting(config: ConsumerConfig, start: Start) -> ConsumerConfig:
    """``config`` delivering from ``start`` on (None: as it says, new messages only)."""
    if isinstance(start, datetime):
        config.deliver_policy, config.opt_start_time = DeliverPolicy.BY_START_TIME, start
    elif isinstance(start, int):
        config.deliver_policy, config.opt_start_seq = DeliverPolicy.BY_START_SEQUENCE, start
    return config


def _setting(config: ConsumerConfig, name: str) -> object:
    value = getattr(config, name)
    # The server leaves out an empty list; so does a config made here.
    return (value or None) if isinstance(value, list) else value


def mismatches(found: ConsumerConfig, wanted: ConsumerConfig) -> list[str]:
    """The settings of ``found`` that are not ``wanted``'s, by name (empty: keep it)."""
    return [name for name in COMPARED if _setting(found, name) != _setting(wanted, name)]


class AgentInboxes:
    """The agents' durable inbox consumers on one stream, and when each was last seen."""

    def __init__(self, stream: str, *, ack_wait_s: float = ACK_WAIT_S) -> None:
        self.stream = stream
        self.ack_wait_s = ack_wait_s
        # Times a consumer was found gone and made again, or found wrong and replaced.
        self.recreated = 0
        self.replaced = 0
        self._seen: dict[str, datetime] = {}

    async def prepare(self, nc: NatsClient, agent: str) -> str:
        """Make ``agent``'s consumer, keep it, or replace one whose settings are not ours:
        ``"made"``, ``"kept"`` or ``"replaced"``."""
        js = nc.jetstream()
        durable = agent_inbox_durable(agent)
        wanted = inbox_config(agent, ack_wait_s=self.ack_wait_s)
        try:
            info = await js.consumer_info(self.stream, durable)
        except NotFoundError:
            await js.add_consumer(self.stream, wanted)
            outcome = "made"
        else:
            wrong = mismatches(info.config, wanted)
            if wrong:
                floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
                log.warning(
                    "agent inboxes: %s on %s differs in %s; replacing it, from stream sequence %d",
                    durable, self.stream, ", ".join(wrong), floor + 1,
                )  # fmt: skip
                await js.delete_consumer(self.stream, durable)
                config = inbox_config(agent, ack_wait_s=self.ack_wait_s, start=floor + 1)
                await js.add_consumer(self.stream, config)
                self.replaced += 1
                outcome = "replaced"
            else:
                outcome = "kept"
        self._seen[agent] = datetime.now(UTC)
        log.info("agent inboxes: %s %s on %s", outcome, durable, self.stream)
        return outcome

    async def check(self, nc: NatsClient, agents: Iterable[str]) -> list[str]:
        """Make again every consumer of ``agents`` that is gone, delivering from the moment
        it was last seen (new messages only if it never was); the agents whose consumer
        was made again."""
        js = nc.jetstream()
        made: list[str] = []
        for agent in agents:
            durable = agent_inbox_durable(agent)
            try:
                await js.consumer_info(self.stream, durable)
            except NotFoundError:
                since = self._seen.get(agent)
                config = inbox_config(agent, ack_wait_s=self.ack_wait_s, start=since)
                await js.add_consumer(self.stream, config)
                self.recreated += 1
                made.append(agent)
                log.warning(
                    "agent inboxes: %s was gone (event log deleted?); made it again from %s",
                    durable, since.isoformat() if since is not None else "now",
                )  # fmt: skip
            self._seen[agent] = datetime.now(UTC)
        return made
