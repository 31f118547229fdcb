"""The effector node: one verb's events in, one JMFTS write each, one ack out.

:class:`Effector` subscribes ``events.workspace.*.out.<verb>``, reads the agent
from the subject (the substrate only lets an agent publish its own ``out.>``),
loads that agent's token from the token directory, performs the verb's write
and acks on the verb's ack subject with the turn's ``binding_id``. Every event
is acked: a failure is ``ok: false`` with the ``error``; an event that cannot be
acked at all (no binding id, not an envelope) is counted and logged. A failure
of ours (a bug met by some input) is caught at the boundary too: counted as
``internal_errors``, logged in one line, acked ``ok: false`` when it can be.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from home.effectors.errors import CredentialError, EffectorError
from home.jmfts.client import JmftsClient
from home.jmfts.errors import JmftsError
from home.memory.provenance import Provenance
from shared.errors import ContractError, EnvelopeError
from shared.event import EnvelopeLimits, Event
from shared.lifecycle import Service, cancel_and_wait
from shared.messages.verbs import VerbAck, VerbRequest
from shared.nats_confirm import confirm_subscriptions
from shared.publisher import Publisher
from shared.subjects import check_name, parse_subject, verb_pattern

log = logging.getLogger(__name__)

DEDUP_WINDOW = 4096

# One verb's write: (client as the agent, where the write comes from, payload) -> the
# document id written. The origin goes into the record (its audit thread).
Write = Callable[[JmftsClient, Provenance, dict[str, Any]], Awaitable[int]]


@dataclass(frozen=True)
class VerbEffector:
    """What one effector does: the verb it serves, where it acks, the write it performs."""

    node: str
    verb: str
    ack_subject: Callable[[str], str]
    write: Write


@dataclass
class EffectorStats:
    """Counters: every event is either acked ok, acked failed, or counted as unackable."""

    received: int = 0
    ok: int = 0
    failed: int = 0
    unackable: int = 0
    duplicates: int = 0
    # Events a handler failed on unexpectedly (still acked failed when they could be).
    internal_errors: int = 0


def read_token(token_dir: Path, agent: str) -> str:
    """The agent's bearer token from ``<token_dir>/<agent>.token``."""
    path = token_dir / f"{check_name(agent, 'agent')}.token"
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CredentialError(f"no JMFTS token for agent {agent!r} ({path}: {exc})") from exc
    if not token:
        raise CredentialError(f"the JMFTS token file for agent {agent!r} is empty ({path})")
    return token


class Effector(Service):
    """A running effector node. ``async with Effector(...)``."""

    def __init__(
        self, spec: VerbEffector, *, nats_url: str, jmfts_url: str, token_dir: Path
    ) -> None:
        self.spec = spec
        self.nats_url = nats_url
        self.jmfts_url = jmfts_url
        self.token_dir = token_dir
        self.stats = EffectorStats()
        self.limits = EnvelopeLimits()
        self._nc: NatsClient | None = None
        self._seen: OrderedDict[str, None] = OrderedDict()
        # Acks go out unchecked against the limits, as they always have: they are our own.
        self._acks = Publisher(spec.node)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pattern(self) -> str:
        """The verb rail this effector subscribes."""
        return verb_pattern(self.spec.verb)

    async def start(self) -> None:
        """Connect, subscribe the verb rail and confirm the subscription."""
        self._nc = await nats.connect(self.nats_url, name=self.spec.node, max_reconnect_attempts=-1)
        self._acks.attach(self._nc)
        await self._nc.subscribe(self.pattern, cb=self._on_verb)
        await confirm_subscriptions(self._nc)

    async def close(self) -> None:
        """Stop the writes in flight, then drain and close the connection."""
        await cancel_and_wait(*self._tasks)
        nc, self._nc = self._nc, None
        if nc is not None:
            await nc.drain()

    async def _on_verb(self, msg: Msg) -> None:
        """The verb rail's boundary: whatever arrives is performed or counted, never raised."""
        self.stats.received += 1
        try:
            self._take(msg)
        # The verb rail's boundary: counted as unackable; the effector goes on.
        except Exception as exc:  # noqa: BLE001
            self.stats.unackable += 1
            self._internal_error(msg.subject, exc)

    def _internal_error(self, where: str, exc: Exception) -> None:
        self.stats.internal_errors += 1
        log.error("%s: handler failed on %s: %r", self.spec.node, where, exc)

    def _take(self, msg: Msg) -> None:
        try:
            agent = parse_subject(msg.subject).agent
            event = Event.from_json(msg.data, self.limits)
        except ContractError as exc:
            self.stats.unackable += 1
            log.warning("%s: refused an event on %s: %s", self.spec.node, msg.subject, exc)
            return
        if agent is None or event.binding_id is None:
            self.stats.unackable += 1
            log.warning("%s: event %s has no binding_id to ack", self.spec.node, event.event_id)
            return
        if event.event_id in self._seen:
            self.stats.duplicates += 1
            return
        self._seen[event.event_id] = None
        while len(self._seen) > DEDUP_WINDOW:
            self._seen.popitem(last=False)
        # Writes run concurrently so one slow agent does not hold up another's ack.
        task = asyncio.create_task(self._perform(agent, event, event.binding_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _perform(self, agent: str, event: Event, binding_id: str) -> None:
        try:
            token = read_token(self.token_dir, agent)
            async with JmftsClient(self.jmfts_url, token=token) as client:
                origin = Provenance(
                    agent=agent,
                    written_by=self.spec.node,
                    binding_id=binding_id,
                    produced_by_schema=event.produced_by_schema or event.routed_by_schema,
                )
                doc_id = await self.spec.write(client, origin, event.payload)
            answer = VerbAck(agent, self.spec.verb, ok=True, doc_id=doc_id)
            self.stats.ok += 1
        except (EffectorError, JmftsError) as exc:
            answer = VerbAck(agent, self.spec.verb, ok=False, error=str(exc))
            self.stats.failed += 1
            log.warning("%s: %s for %s failed: %s", self.spec.node, self.spec.verb, agent, exc)
        # A verb's failure of any kind is acked as failed, never raised.
        except Exception as exc:  # noqa: BLE001
            error = f"internal error in {self.spec.node}: {exc!r}"
            answer = VerbAck(agent, self.spec.verb, ok=False, error=error)
            self.stats.failed += 1
            self._internal_error(f"{self.spec.verb} for {agent}", exc)
        stamp = self._acks.stamp(
            binding_id=binding_id,
            hops=(*event.hops, self.spec.node),
            produced_by_schema=event.produced_by_schema or event.routed_by_schema,
        )
        try:
            ack = answer.to_event(**stamp)
            if self._nc is not None:
                await self._acks.send(self.spec.ack_subject(binding_id), ack)
        # A connection gone, or an ack we cannot build.
        except Exception as exc:  # noqa: BLE001
            self._internal_error(f"the ack of {binding_id}", exc)


def verb_request(payload: dict[str, Any]) -> VerbRequest:
    """A verb payload as its message, refused (as an effector error) when malformed."""
    try:
        return VerbRequest.from_payload(payload)
    except EnvelopeError as exc:
        raise EffectorError(str(exc)) from exc


def note_text(payload: dict[str, Any]) -> str:
    """The ``text`` of a verb payload, refused (as an effector error) when missing."""
    return verb_request(payload).text.strip()
