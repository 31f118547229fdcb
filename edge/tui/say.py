"""``edge say``: one typed turn through the same session as the TUI, and its answer.

Sends the line, waits for the first speak or reply carrying its ``binding_id``
(acking a speak with ``speech.completed`` like the TUI does), and returns it with
its timings. Memory reports for the turn that arrive before the answer come along.
With ``listen_s`` it stays that long after the answer and keeps what home says to the
device of its own accord (a reminder falling due, the operator's answer to a question),
each acked as played, as a board would.
Through the bridge, a turn or ack the edge half does not take ends the say at once
with :class:`~edge.errors.NotTaken` saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from edge.errors import NotTaken
from edge.tui.errors import TurnTimeout
from edge.tui.session import EdgeSession, SessionObserver
from edge.tui.wire import AgentReply, Incoming, MemoryReport
from edge.wire import SpeakRequest
from shared.event import utc_now


@dataclass(frozen=True)
class Later:
    """Something home said to the device after the answer, of its own accord."""

    answer: SpeakRequest | AgentReply
    at: datetime

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        kind = "speak" if isinstance(self.answer, SpeakRequest) else "reply"
        return {
            "kind": kind,
            "agent": self.answer.agent,
            "text": self.answer.text,
            "binding_id": self.answer.binding_id,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True)
class SayResult:
    """The answer to one typed turn, and when things happened."""

    device: str
    binding_id: str
    text: str
    answer: SpeakRequest | AgentReply
    notes: tuple[MemoryReport, ...]
    sent_at: datetime
    answered_at: datetime
    connect_ms: float
    first_answer_ms: float
    later: tuple[Later, ...] = ()

    @property
    def kind(self) -> str:
        """``speak`` or ``reply``."""
        return "speak" if isinstance(self.answer, SpeakRequest) else "reply"

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form."""
        answer: dict[str, Any] = {
            "kind": self.kind,
            "agent": self.answer.agent,
            "text": self.answer.text,
            "spoken": isinstance(self.answer, SpeakRequest) or self.answer.spoken,
        }
        if isinstance(self.answer, AgentReply):
            answer["reason"] = self.answer.reason
        return {
            "device": self.device,
            "binding_id": self.binding_id,
            "text": self.text,
            "answer": answer,
            "notes": [{"kind": n.kind, "agent": n.agent, "summary": n.summary} for n in self.notes],
            "later": [later.to_json() for later in self.later],
            "timings": {
                "sent_at": self.sent_at.isoformat(),
                "answered_at": self.answered_at.isoformat(),
                "connect_ms": round(self.connect_ms, 1),
                "first_answer_ms": round(self.first_answer_ms, 1),
            },
        }


@dataclass
class _Collector(SessionObserver):
    """Keeps what arrives for one binding_id.

    ``done`` is set by the first answer: at once for a reply, once its
    ``speech.completed`` ack is out for a speak (so the speak verb gets it). An
    answer spoken in parts (``more`` on all but the last) is done at its last
    part's ack, its text the parts joined.
    """

    binding_id: str | None = None
    answer: SpeakRequest | AgentReply | None = None
    answered_mono: float | None = None
    answered_wall: datetime | None = None
    notes: list[MemoryReport] = field(default_factory=list)
    early: list[Incoming] = field(default_factory=list)
    not_taken: NotTaken | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # After the answer: what else home says to the device, and the words that end the wait.
    listening: bool = False
    later: list[Later] = field(default_factory=list)
    until: str | None = None
    heard: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_incoming(self, item: Incoming) -> None:
        if self.binding_id is None:
            # The turn is being published right now; an answer cannot be faster, but keep order.
            self.early.append(item)
            return
        self._take(item)

    def watch(self, binding_id: str) -> None:
        self.binding_id = binding_id
        for item in self.early:
            self._take(item)
        self.early.clear()

    def _take(self, item: Incoming) -> None:
        if item.binding_id != self.binding_id:
            if self.listening and isinstance(item, SpeakRequest | AgentReply):
                self.later.append(Later(item, utc_now()))
                if self.until is not None and self.until.lower() in item.text.lower():
                    self.heard.set()
            return
        if isinstance(item, MemoryReport):
            self.notes.append(item)
        elif self.answer is None:
            self.answer = item
            self.answered_mono = time.monotonic()
            self.answered_wall = utc_now()
            if isinstance(item, AgentReply):
                self.done.set()
        elif (
            isinstance(self.answer, SpeakRequest)
            and self.answer.more
            and isinstance(item, SpeakRequest)
        ):
            # The next part of an answer spoken in parts.
            text = f"{self.answer.text} {item.text}"
            self.answer = replace(self.answer, text=text, more=item.more)

    def on_not_taken(self, failure: NotTaken) -> None:
        if failure.binding_id == self.binding_id:
            self.not_taken = failure
            self.done.set()

    def on_acked(self, binding_id: str) -> None:
        answer = self.answer
        parts_follow = isinstance(answer, SpeakRequest) and answer.more
        if answer is not None and binding_id == self.binding_id and not parts_follow:
            self.done.set()


async def say_once(
    nats_url: str,
    device: str,
    text: str,
    *,
    timeout_s: float,
    asks_bridge: bool = False,
    listen_s: float = 0.0,
    until: str | None = None,
) -> SayResult:
    """Send ``text`` as one turn from ``device`` and wait for its answer; then, for
    ``listen_s`` seconds (or until home says something holding ``until``), keep what
    home says to the device of its own accord.

    Raises :class:`TurnTimeout` if no speak or reply for the turn arrives within
    ``timeout_s``, ``TransportError`` if the NATS URL cannot be reached, and (with
    ``asks_bridge``, the edge's NATS and its bridge half) :class:`NotTaken` if the half
    did not take the turn or its answer's ack.
    """
    started = time.monotonic()
    async with EdgeSession(nats_url, device, asks_bridge=asks_bridge) as session:
        collector = _Collector(listening=listen_s > 0, until=until)
        await session.listen(collector)
        connected = time.monotonic()
        sent_mono = time.monotonic()
        turn = await session.send_turn(text)
        collector.watch(turn.binding_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(collector.done.wait(), timeout_s)
        if collector.not_taken is not None:
            raise collector.not_taken
        answer, answered_mono = collector.answer, collector.answered_mono
        if answer is None or answered_mono is None or collector.answered_wall is None:
            raise TurnTimeout(turn.binding_id, timeout_s)
        if listen_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(collector.heard.wait(), listen_s)
        return SayResult(
            device=device,
            binding_id=turn.binding_id,
            text=text,
            answer=answer,
            notes=tuple(collector.notes),
            sent_at=turn.typed_at,
            answered_at=collector.answered_wall,
            connect_ms=(connected - started) * 1000,
            first_answer_ms=(answered_mono - sent_mono) * 1000,
            later=tuple(collector.later),
        )
