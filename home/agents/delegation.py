"""Delegation as an agent node sees it, on both sides (pure; docs/architecture.md "Delegation").

The asking agent's ``delegate`` tool publishes the task on its ``out.delegate`` rail;
a schema binds that rail into the operator agent's inbox. The operator's node acks
the task when it admits it, or refuses it naming why (:func:`delegation_ack`), on
``events.journal.delegate.<binding_id>``; when the turn is over it publishes a
:class:`~shared.messages.verbs.DelegateAnswer` (the answer, or why there is none) on
``events.workspace.<operator>.out.answer.<asker>``, which a schema binds back into
the asker's inbox: a new turn of the asker with the original binding id, prompted
with :func:`answer_prompt`.

The asker's node keeps the tasks it saw taken (:class:`PendingDelegations`); one
still unanswered after ``delegate_timeout_s`` gets an answer that says so
(:func:`timed_out`), published into the asker's own inbox, so the user hears it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.errors import ContractError
from shared.event import Event
from shared.messages.verbs import DelegateAnswer, VerbAck, VerbRequest
from shared.schema.catalog import NodeSpec
from shared.subjects import DELEGATE_ACKS_PATTERN

# The operator's acks of delegated tasks, as the agent node subscribes them.
DELEGATE_ACKS = DELEGATE_ACKS_PATTERN
# The verbs extension's own default (home/tau_extensions/verbs.py), when the catalog names none.
DEFAULT_DELEGATE_TIMEOUT_S = 120.0
# How many delegations an asker remembers while it waits for their answers.
PENDING_LIMIT = 64


@dataclass(frozen=True)
class Delegated:
    """A task another agent handed this one: who asked, and the question as asked."""

    asker: str
    question: str


@dataclass(frozen=True)
class Pending:
    """A task this agent handed off and whose answer it waits for."""

    binding_id: str
    device: str | None
    question: str
    schema: str | None


def _verbs_config(spec: NodeSpec) -> Mapping[str, Any]:
    """The config of the node's verbs extension (empty when it loads none)."""
    return next((ext.config for ext in spec.extensions if ext.name == "verbs"), {})


def delegate_timeout(spec: NodeSpec) -> float:
    """How long the node's agent waits for a delegated answer (verbs' ``delegate_timeout_s``)."""
    return float(_verbs_config(spec).get("delegate_timeout_s", DEFAULT_DELEGATE_TIMEOUT_S))


def delegates(spec: NodeSpec) -> bool:
    """Whether the node's agent is offered ``delegate`` (its verbs extension lists it):
    only such a node watches the delegate acks, which its bus user may read."""
    return "delegate" in _verbs_config(spec).get("verbs", ())


def delegation_ack(
    delegated: Delegated,
    binding_id: str,
    refusal: str | None,
    *,
    source: str,
    seq: int,
    schema: str | None,
) -> Event:
    """The operator's ack of a task: taken (``refusal`` None), or refused naming why."""
    ack = VerbAck(agent=delegated.asker, verb="delegate", ok=refusal is None, error=refusal)
    return ack.to_event(
        source=source,
        sequence_number=seq,
        binding_id=binding_id,
        produced_by_schema=schema,
    )


def answer_prompt(answer: DelegateAnswer) -> str:
    """What the asking agent is prompted with when the answer (or its absence) comes back."""
    asked = f'You asked the operator: "{answer.question}".'
    if answer.ok:
        return (
            f"{asked} Its answer: {answer.text.strip()}\n"
            "Tell the user this answer now, in your own words."
        )
    return (
        f"{asked} It has no answer: {answer.error or 'no reason given'}.\n"
        "Tell the user now, briefly, that you could not find out."
    )


def delegated_task(event: Event) -> Pending | None:
    """The task this agent handed off, read from its own ``out.delegate`` event
    (None when the event has no binding or is not a verb request)."""
    if event.binding_id is None:
        return None
    try:
        request = VerbRequest.from_event(event)
    except ContractError:
        return None
    return Pending(event.binding_id, request.device, request.text.strip(), event.produced_by_schema)


def operator_answer(
    delegated: Delegated, device: str | None, text: str, error: str | None, operator: str
) -> DelegateAnswer:
    """The operator's answer to ``delegated`` (``error``: why it has none)."""
    return DelegateAnswer(
        question=delegated.question, asker=delegated.asker, device=device,
        ok=error is None, text=text, error=error, operator=operator,
    )  # fmt: skip


def timed_out(pending: Pending, timeout_s: float, asker: str) -> DelegateAnswer:
    """The answer an asker's node makes when the operator's has not come in time."""
    return DelegateAnswer(
        question=pending.question,
        asker=asker,
        device=pending.device,
        ok=False,
        error=f"the operator did not answer within {timeout_s:g} seconds",
    )


class PendingDelegations:
    """The tasks an agent handed off and has not heard back on, bounded.

    The task (seen on the agent's own ``out.delegate``) and the operator's ack come on
    two subscriptions, in either order; the task is timed from when both are known.
    """

    def __init__(self, limit: int = PENDING_LIMIT) -> None:
        self._pending: OrderedDict[str, Pending] = OrderedDict()
        self._acks: OrderedDict[str, bool] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._pending)

    def asked(self, pending: Pending) -> Pending | None:
        """The agent published a task; returned when it is to be timed now (already taken)."""
        self._pending[pending.binding_id] = pending
        _trim(self._pending, self._limit)
        return pending if self._acks.get(pending.binding_id) is True else None

    def acked(self, binding_id: str, *, ok: bool) -> Pending | None:
        """The operator's ack; returns the task when it is to be timed now (taken, and seen)."""
        self._acks[binding_id] = ok
        _trim(self._acks, self._limit)
        if not ok:
            self._pending.pop(binding_id, None)
            return None
        return self._pending.get(binding_id)

    def answered(self, binding_id: str) -> None:
        """An answer came back (from the operator, or the node's own timeout answer)."""
        self._pending.pop(binding_id, None)
        self._acks.pop(binding_id, None)

    def due(self, binding_id: str) -> Pending | None:
        """The timeout of ``binding_id`` passed: the task, if it was taken and is unanswered."""
        pending = self._pending.pop(binding_id, None)
        taken = self._acks.pop(binding_id, False)
        return pending if taken else None


def memory_refusal(run_contexts: Iterable[tuple[str, ...]], *, has_memory: bool) -> str | None:
    """Why this agent cannot take delegated tasks in this run, or None when it can.

    An agent whose extensions read memory (they name ``jmfts_token_file``) has nothing
    to answer from in a run without JMFTS: it refuses rather than invents.
    """
    needs = any("jmfts_token_file" in keys for keys in run_contexts)
    if needs and not has_memory:
        return "it has no memory to search in this run (JMFTS is not running)"
    return None


def _trim(table: OrderedDict[str, Any], limit: int) -> None:
    while len(table) > limit:
        table.popitem(last=False)
