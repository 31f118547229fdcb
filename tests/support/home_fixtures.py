"""What the home tests share besides fixtures: the edge's side of a turn, the event-log server.

The fixtures built on them (``catalog``, ``edge``, ``jmfts``) live in tests/home/conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.msg import Msg

from home.substrate.agent_inboxes import AgentInboxes, reads_inbox
from home.substrate.config import DEFAULT_CATALOG, EventLogConfig
from home.substrate.eventlog import ensure_stream
from home.substrate.nats_server import NatsServer
from shared.errors import ContractError
from shared.event import DEFAULT_TTL_MS, Event, new_binding_id
from shared.schema import load_node_catalog
from shared.subjects import speech_completed_subject, workspace_in_subject

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BusEvent:
    """One event seen on the bus, with its subject."""

    subject: str
    event: Event
    raw: bytes


@dataclass
class EdgeSide:
    """The test standing where the edge stands: it publishes utterances and acks speech.

    It records everything on ``events.>``; with ``ack_speech`` on, every speak
    event is acknowledged on ``events.action.speech.completed.<binding_id>``
    exactly as the edge TTS node does after playback.
    """

    nc: Any
    agent: str
    device: str = "tui"
    ack_speech: bool = True
    seen: list[BusEvent] = field(default_factory=list)
    _seq: int = 0

    async def on_event(self, msg: Msg) -> None:
        try:
            event = Event.from_json(msg.data)
        except ContractError:  # not an event of ours: nothing to record
            return
        self.seen.append(BusEvent(msg.subject, event, msg.data))
        if self.ack_speech and self._speaks_here(msg.subject) and event.binding_id:
            self._seq += 1
            ack = Event.new(
                "speech.completed",
                {"ok": True, "text": event.payload.get("text")},
                source=f"edge.audio.{self.device}",
                sequence_number=self._seq,
                binding_id=event.binding_id,
            )
            await self.nc.publish(speech_completed_subject(event.binding_id), ack.to_json())

    def _speaks_here(self, subject: str) -> bool:
        """A speak for this device (or for none: the router would resolve it)."""
        return subject.endswith(f".out.speak.{self.device}") or subject.endswith(".out.speak")

    async def say(
        self,
        text: str,
        *,
        binding_id: str | None = None,
        received: Callable[[], int] | None = None,
        ttl_ms: int = DEFAULT_TTL_MS,
        **payload: Any,
    ) -> Event:
        """Publish one utterance on the agent's inbound rail, as the router delivers it.

        With ``received`` (the node's delivery counter), the same event is published
        again until the counter moves: a just-made subscription on this nats-server
        occasionally misses its first message (seen 2 in 200 under load), and the
        node deduplicates on ``event_id``, so a repeat is harmless by contract.
        """
        self._seq += 1
        event = Event.new(
            "sensation.turn",
            {"text": text, "device": self.device, **payload},
            source=f"edge.audio.{self.device}",
            sequence_number=self._seq,
            binding_id=binding_id or new_binding_id(),
            ttl_ms=ttl_ms,
        )
        before = received() if received is not None else 0
        async with asyncio.timeout(60):
            while True:
                await self.nc.publish(workspace_in_subject(self.agent), event.to_json())
                await self.nc.flush()
                if received is None:
                    break
                for _ in range(25):
                    if received() > before:
                        return event
                    await asyncio.sleep(0.02)
        return event

    def on(self, rail: str) -> list[BusEvent]:
        """Events seen on ``events.workspace.<agent>.out.<rail>...``."""
        prefix = f"events.workspace.{self.agent}.out.{rail}"
        return [e for e in self.seen if e.subject.startswith(prefix)]

    async def wait_for(self, rail: str, count: int = 1, timeout_s: float = 60.0) -> list[BusEvent]:
        """Wait until ``count`` events have been seen on ``rail``; return them."""
        try:
            async with asyncio.timeout(timeout_s):
                while len(self.on(rail)) < count:
                    await asyncio.sleep(0.01)
        except TimeoutError:
            seen = [e.subject for e in self.seen]
            message = f"{count} event(s) on {rail} not seen in {timeout_s}s: {seen}"
            raise AssertionError(message) from None
        return self.on(rail)

    def all_raw(self) -> bytes:
        """Every event seen, concatenated (for leak checks)."""
        return b"\n".join(e.raw for e in self.seen)


def payload_json(event: BusEvent) -> str:
    """An event's payload as compact JSON (for assertion messages)."""
    return json.dumps(event.event.payload)


@contextlib.asynccontextmanager
async def event_log_server(work: Path) -> AsyncIterator[str]:
    """nats-server as `home up` runs it: JetStream on, the event log recording ``events.>``.

    Yields its URL. An agent node on it reads its rail through its durable inbox, made
    here for every agent of the shipped catalog, as the substrate makes it before it
    starts the node.
    """
    server = NatsServer(work / "nats")
    await server.start()
    try:
        nc = await nats.connect(server.url)
        await ensure_stream(nc, EventLogConfig())
        inboxes = AgentInboxes(EventLogConfig().stream)
        for spec in load_node_catalog(DEFAULT_CATALOG).nodes.values():
            if spec.agent is not None and reads_inbox(spec):
                await inboxes.prepare(nc, spec.agent)
        await nc.close()
        yield server.url
    finally:
        await server.close()
