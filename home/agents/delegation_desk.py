"""The agent node's delegation desk, both ways (docs/architecture.md "Delegation").

As operator, the desk acks a task another agent delegated (:meth:`DelegationDesk.ack`)
and, when its turn is over, sends the answer back (:meth:`DelegationDesk.answer`).
As asker, it sees its agent hand a task off (:meth:`DelegationDesk.delegated_out`,
from the node's own ``out.delegate``) and the operator's ack
(:meth:`DelegationDesk.on_ack`), and times the answer: one not come within
``delegate_timeout_s`` is answered by the node itself, into its own inbox, so the
user hears why. What to do is decided in :mod:`home.agents.delegation` (no I/O);
the desk publishes and keeps the timers, which :meth:`DelegationDesk.close` ends.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg

from home.agents.admission import PendingTurn
from home.agents.answers import AgentPublisher
from home.agents.delegation import (
    Pending,
    PendingDelegations,
    delegated_task,
    delegation_ack,
    operator_answer,
    timed_out,
)
from home.agents.inbound import Inbound
from home.agents.node_stats import NodeStats
from shared.errors import ContractError
from shared.event import Event
from shared.lifecycle import cancel_and_wait
from shared.messages.verbs import VerbAck
from shared.subjects import delegate_ack_subject, delegate_answer_subject, workspace_in_subject

log = logging.getLogger(__name__)


class DelegationDesk:
    """Acks and answers for tasks delegated to this agent; timers for those it delegated.

    ``cannot_take`` says why this agent refuses every delegated task in this run
    (:func:`~home.agents.delegation.memory_refusal`), or is None.
    """

    def __init__(
        self,
        agent: str,
        publisher: AgentPublisher,
        stats: NodeStats,
        *,
        timeout_s: float,
        cannot_take: str | None,
    ) -> None:
        self.agent = agent
        self.timeout_s = timeout_s
        self.cannot_take = cannot_take
        self._publisher = publisher
        self._stats = stats
        self._name = publisher.source
        self._pending = PendingDelegations()
        self._timers: set[asyncio.Task[None]] = set()
        self._timing = True

    # --- as operator ------------------------------------------------------------

    async def ack(self, inbound: Inbound, refusal: str | None) -> None:
        """Tell the asker its task was taken, or why it was not."""
        if inbound.delegated is None or not self._publisher.attached:
            return
        if refusal is not None:
            log.warning("%s: refused a delegated task: %s", self._name, refusal)
        event = delegation_ack(
            inbound.delegated, inbound.binding_id, refusal, source=self._name,
            seq=self._publisher.next_sequence(), schema=inbound.event.routed_by_schema,
        )  # fmt: skip
        await self._publisher.send(delegate_ack_subject(inbound.binding_id), event)

    async def answer(self, turn: PendingTurn, text: str, error: str | None) -> None:
        """The operator's answer (or why it has none) on its answer rail, back to the asker."""
        delegated = turn.delegated
        if delegated is None:
            return
        answer = operator_answer(delegated, turn.binding.device, text, error, self.agent)
        await self._publisher.publish(
            delegate_answer_subject(self.agent, delegated.asker), answer,
            binding_id=turn.binding.binding_id, produced_by_schema=turn.binding.schema,
        )  # fmt: skip

    # --- as asker ---------------------------------------------------------------

    def answered(self, binding_id: str) -> None:
        """An answer to one of this agent's tasks came into its inbox: stop timing it."""
        self._pending.answered(binding_id)

    def delegated_out(self, event: Event) -> None:
        """This agent handed a task off: time its answer once the operator has taken it."""
        pending = delegated_task(event)
        if pending is not None:
            self._time_answer(self._pending.asked(pending))

    async def on_ack(self, msg: Msg) -> None:
        """An operator's ack: a refused task is forgotten, a taken one is timed. Any local
        client can publish there: what does not parse is skipped, a failure counted."""
        try:
            ack = VerbAck.from_event(Event.from_json(msg.data, self._publisher.limits))
            if ack.agent == self.agent:
                binding_id = msg.subject.rsplit(".", 1)[-1]
                self._time_answer(self._pending.acked(binding_id, ok=ack.ok))
        except ContractError:
            return
        # The delegate-ack rail's boundary: counted; the desk goes on.
        except Exception as exc:  # noqa: BLE001
            self._stats.internal_error(self._name, "delegate ack", msg, exc)

    def stop_timing(self) -> None:
        """Time no new answer (the node is stopping)."""
        self._timing = False

    async def close(self) -> None:
        """Stop timing, and cancel and await the timers that run."""
        self._timing = False
        await cancel_and_wait(*self._timers, reraise=False)

    def _time_answer(self, pending: Pending | None) -> None:
        if pending is None or not self._timing:
            return
        timer = asyncio.create_task(self._await_answer(pending), name=f"{self._name}-delegate")
        self._timers.add(timer)
        timer.add_done_callback(self._timers.discard)

    async def _await_answer(self, pending: Pending) -> None:
        """No answer in time: the agent is told so, through its own inbox, as a new turn."""
        await asyncio.sleep(self.timeout_s)
        if self._pending.due(pending.binding_id) is None or not self._publisher.attached:
            return  # answered, or never taken
        self._stats.delegations_timed_out += 1
        log.warning(
            "%s: no answer to delegated task %s within %gs",
            self._name, pending.binding_id, self.timeout_s,
        )  # fmt: skip
        answer = timed_out(pending, self.timeout_s, self.agent)
        try:
            await self._publisher.publish(
                workspace_in_subject(self.agent), answer,
                binding_id=pending.binding_id, produced_by_schema=pending.schema,
            )  # fmt: skip
        # Telling the agent is best effort: counted and logged.
        except Exception as exc:  # noqa: BLE001
            self._stats.internal_errors += 1
            log.error("%s: could not tell the agent of %s: %r", self._name, pending, exc)
