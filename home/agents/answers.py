"""What an agent node publishes of a turn: its prose answer, or why it has none.

An agent with a handset speaks its answers itself; one without answers in prose,
and the node publishes that answer (:meth:`Answers.answer`). A turn that did not
finish normally (aborted, failed) is reported (:meth:`Answers.report`). Either
goes on the device's reply rail, never spoken by home, or, for a task another
agent delegated, back to the asker on the answer rail (through the
:class:`DelegatedAnswers` the node hands in: :mod:`home.agents.delegation_desk`).

Where each goes is decided by :func:`route_answer` and :func:`route_report`, which
do no I/O; :class:`AgentPublisher` is the node's one sender: its source, its
sequence numbers and the envelope limits.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Protocol

from home.agents.admission import PendingTurn
from home.agents.conversations import TauRequester
from home.agents.errors import AgentError
from shared.event import EnvelopeLimits
from shared.messages.voice import Reply
from shared.publisher import Publisher
from shared.subjects import reply_subject

log = logging.getLogger(__name__)


class AgentPublisher(Publisher):
    """The node's sender: one source, one sequence, the envelope limits.

    Attached to the node's NATS connection while it runs; detached, it publishes
    nothing (and counts nothing), as a node that is not started has no bus.
    """

    def __init__(self, source: str, limits: EnvelopeLimits) -> None:
        super().__init__(source, limits=limits)


class DelegatedAnswers(Protocol):
    """Who sends a delegated task's answer back to the agent that asked."""

    async def answer(self, turn: PendingTurn, text: str, error: str | None) -> None:
        """The operator's answer (or why it has none), back to the asker."""
        ...


@dataclass(frozen=True)
class ToAsker:
    """A delegated task's answer (``error``: why there is none), back to its asker."""

    text: str
    error: str | None


@dataclass(frozen=True)
class ToDevice:
    """A reply on the device's reply rail."""

    subject: str
    reply: Reply


def route_answer(turn: PendingTurn, text: object, agent: str) -> ToAsker | ToDevice | None:
    """Where the model's last text (``None`` when unread) goes: nowhere when blank or deviceless."""
    said = text.strip() if isinstance(text, str) else ""
    if turn.delegated is not None:
        return ToAsker(said, None if said else "it gave no answer")
    device = turn.binding.device
    if not said or device is None:
        return None
    reply = Reply(said, spoken=False, kind="answer", agent=agent)
    return ToDevice(reply_subject(agent, device), reply)


def route_report(
    turn: PendingTurn, kind: str, reason: str, agent: str
) -> ToAsker | ToDevice | None:
    """Where a turn that did not finish normally is reported (``kind`` aborted or failed)."""
    if turn.delegated is not None:
        return ToAsker("", f"its turn {kind}: {reason}")
    device = turn.binding.device
    if device is None:
        return None
    reply = Reply("", spoken=False, kind=kind, reason=reason, agent=agent)
    return ToDevice(reply_subject(agent, device), reply)


class Answers:
    """Publishes a turn's answer and reports, on the rail :func:`route_answer` picks."""

    def __init__(self, agent: str, publisher: AgentPublisher, delegated: DelegatedAnswers) -> None:
        self.agent = agent
        self._publisher = publisher
        self._delegated = delegated

    async def answer(self, tau: TauRequester, turn: PendingTurn) -> None:
        """Read τ's last answer and publish it (an agent without a handset answers in prose)."""
        try:
            text = (await tau.request("get_last_assistant_text", {})).get("text")
        except AgentError as exc:
            log.warning("%s: could not read the answer: %s", self._publisher.source, exc)
            text = None
        route = route_answer(turn, text, self.agent)
        if isinstance(route, ToAsker):
            await self._delegated.answer(turn, route.text, route.error)
        elif route is not None:
            await self._reply(turn, route)

    async def report(self, turn: PendingTurn, kind: str, reason: str) -> None:
        """Report a turn that did not finish normally; a failure to publish is not the turn's."""
        route = route_report(turn, kind, reason, self.agent)
        with contextlib.suppress(Exception):
            if isinstance(route, ToAsker):
                await self._delegated.answer(turn, route.text, route.error)
            elif route is not None:
                await self._reply(turn, route)

    async def _reply(self, turn: PendingTurn, route: ToDevice) -> None:
        await self._publisher.publish(
            route.subject, route.reply,
            binding_id=turn.binding.binding_id, produced_by_schema=turn.binding.schema,
        )  # fmt: skip
