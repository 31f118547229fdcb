"""The agent node's worker: one turn at a time, from the admission queue to τ and back.

:meth:`TurnRunner.work` takes turns off :class:`~home.agents.admission.Admission`
(devices round robin). A turn the verb desk carries out (:mod:`home.agents.verb_desk`:
a note, a forget, a reminder) is over there; for every other:

1. enters the device's conversation (:mod:`home.agents.conversation_book`) and
   writes the turn's binding to the per-run binding file, which the extensions
   re-read on every publish;
2. ``prompt`` τ (acceptance), then waits for the ``agent_end`` with the same
   submission id (completion, read off τ's wire by :meth:`TurnRunner.on_wire_event`),
   under the node's wall clock;
3. over the wall clock, or told to give way: ``abort``, waits for the turn to
   unwind, reports it;
4. τ dead mid-turn: the supervisor starts it again and the same utterance is
   delivered once more (never a lost utterance);

then publishes the answer (:mod:`home.agents.answers`) and keeps the conversation
bounded (:mod:`home.agents.compactor`). The choices are :mod:`home.agents.admission`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from home.agents.admission import (
    Admission,
    Admit,
    PendingTurn,
    abort_reason,
    judge_end,
    may_redeliver,
    outlived,
)
from home.agents.answers import Answers
from home.agents.compactor import Compactor
from home.agents.conversation_book import ConversationBook
from home.agents.errors import AgentError, RestartBudgetExhausted, TauExited, TauRpcError
from home.agents.inbox import Inbox
from home.agents.node_stats import NodeStats, TurnOutcome
from home.agents.protocol import ABORT_GRACE_S, SUBMISSION_REJECTED, WireEvent, prompt_params
from home.agents.tau_process import TauProcess
from home.agents.tau_supervisor import TauSupervisor
from home.intent.errors import IntentError
from home.tau_extensions.binding import write_binding
from shared.event import utc_now

log = logging.getLogger(__name__)

# Backoff while τ unwinds the previous turn after its agent_end.
BUSY_RETRY_FIRST_S = 0.001
BUSY_RETRY_MAX_S = 0.05


class Desk(Protocol):
    """A part that carries some turns out itself, before τ: the verb desk
    (:mod:`home.agents.verb_desk`) or a small model's operator search
    (:mod:`home.agents.operator_search`)."""

    async def take(self, turn: PendingTurn) -> bool:
        """Carry ``turn`` out (True), or leave it to τ."""
        ...

    def passed(self, turn: PendingTurn) -> None:
        """``turn`` was left to τ."""
        ...


@dataclass(frozen=True)
class TurnParts:
    """What the runner works with besides τ: the node's other parts and its counters."""

    admission: Admission
    conversations: ConversationBook
    compactor: Compactor
    answers: Answers
    stats: NodeStats
    # What takes some turns before τ (None: every turn goes to τ).
    desk: Desk | None = None


class TurnRunner:
    """Runs the node's turns one at a time; the node starts :meth:`work` as its worker task.

    ``inbox`` is the durable inbox a finished turn's message is settled on; the node
    sets it while the inbox is open.
    """

    def __init__(
        self, name: str, tau: TauSupervisor, parts: TurnParts, *, binding_file: Path,
        wall_clock_s: float, answers_aloud: bool,
    ) -> None:  # fmt: skip
        self.name = name
        self.wall_clock_s = wall_clock_s
        self.answers_aloud = answers_aloud
        self.binding_file = binding_file
        self.inbox: Inbox | None = None
        self.draining = False
        self._tau = tau
        self._parts = parts
        self._admission = parts.admission
        self._stats = parts.stats
        # Set when the turn in flight should give way (Admission.should_yield).
        self._yield = asyncio.Event()
        self._queued = asyncio.Event()
        self._ends: dict[str, asyncio.Future[WireEvent]] = {}
        self._turn_over = asyncio.Event()
        self._last_prompt_written = 0.0

    # --- signals from the node's other parts --------------------------------------

    def admitted(self, ruling: Admit) -> None:
        """Wake the worker for a queued turn, and stop the one in flight if it must give way."""
        self._queued.set()
        if ruling.supersede:
            self._yield.set()

    def give_way(self) -> None:
        """The turn in flight should give way (its device does not listen, others wait)."""
        self._yield.set()

    def on_wire_event(self, event: WireEvent) -> None:
        """An ``agent_end`` ends the wait of the turn with its submission id."""
        if event.type == "agent_end" and event.submission_id is not None:
            future = self._ends.get(event.submission_id)
            if future is not None and not future.done():
                future.set_result(event)

    async def wait_turn_over(self) -> None:
        """Until the turn in flight is over."""
        await self._turn_over.wait()

    # --- the worker ----------------------------------------------------------------

    async def work(self) -> None:
        """Take turns until drained; a spent restart budget is raised to the node."""
        while True:
            turn = await self._next()
            self._turn_over.clear()
            try:
                if not self._outlived(turn):
                    await self._run_turn(turn)
            except RestartBudgetExhausted:
                raise
            except AgentError as exc:
                # One turn's failure is counted and reported; the node takes the next.
                self._stats.failed += 1
                log.error("%s: turn %s failed: %s", self.name, turn.binding.binding_id, exc)
                await self._parts.answers.report(turn, "failed", str(exc))
            finally:
                self._admission.end()
                self._turn_over.set()
            # Over (answered, or failed and reported): the stream may forget it.
            if turn.msg is not None and self.inbox is not None:
                await self.inbox.done(turn.msg)
            if self.draining:
                return

    async def _next(self) -> PendingTurn:
        while not self._admission:
            self._queued.clear()
            await self._queued.wait()
        return self._admission.begin()

    def _outlived(self, turn: PendingTurn) -> bool:
        """Whether ``turn`` expired while it waited in the queue (counted as stale)."""
        expired_at = outlived(turn, utc_now())
        if expired_at is None:
            return False
        self._stats.stale += 1
        log.warning(
            "%s: utterance %s expired while queued (at %s); not answered",
            self.name, turn.binding.event_id, expired_at.isoformat(),
        )  # fmt: skip
        return True

    async def _run_turn(self, turn: PendingTurn) -> None:
        if await self._taken_by_desk(turn):
            return
        while True:
            try:
                tau = await self._tau.ensure()
            except RestartBudgetExhausted:
                raise
            except AgentError as exc:
                log.warning("%s: τ did not start: %s", self.name, exc)
                continue
            turn.deliveries += 1
            try:
                outcome = await self._prompt_once(tau, turn)
            except TauExited as exc:
                if not may_redeliver(turn):
                    self._stats.failed += 1
                    log.error(
                        "%s: τ died twice on binding %s; dropping it: %s",
                        self.name, turn.binding.binding_id, exc,
                    )  # fmt: skip
                    await self._parts.answers.report(
                        turn, "failed", f"the agent process died: {exc}"
                    )
                    return
                self._stats.redelivered += 1
                continue
            self._stats.outcomes.append(outcome)
            return

    async def _taken_by_desk(self, turn: PendingTurn) -> bool:
        """Whether the verb desk carried ``turn`` out (then τ never sees it)."""
        desk = self._parts.desk
        if desk is None:
            return False
        try:
            if await desk.take(turn):
                return True
        except IntentError as exc:  # the step could not judge: the model answers instead
            log.warning("%s: intent step failed on %s: %s", self.name,
                        turn.binding.binding_id, exc)  # fmt: skip
        desk.passed(turn)
        return False

    async def _prompt_once(self, tau: TauProcess, turn: PendingTurn) -> TurnOutcome:
        entered = await self._parts.conversations.enter(tau, turn)
        write_binding(self.binding_file, turn.binding)
        submission_id = str(uuid.uuid4())
        ended: asyncio.Future[WireEvent] = asyncio.get_running_loop().create_future()
        self._ends[submission_id] = ended
        started = time.monotonic()
        try:
            await self._submit(tau, turn, submission_id)
            prompted = self._last_prompt_written
            self._stats.prompts += 1
            end = await self._await_end(tau, ended, turn)
        finally:
            self._ends.pop(submission_id, None)
        ending = judge_end(end, answers_aloud=self.answers_aloud)
        if ending.publish_answer:
            await self._parts.answers.answer(tau, turn)
        if ending.counted == "aborted":
            self._stats.aborted += 1
        elif ending.failure is not None:
            self._stats.failed += 1
            log.warning("%s: turn ended in error: %s", self.name, end.error)
            await self._parts.answers.report(turn, "failed", ending.failure)
        else:
            self._stats.completed += 1
        outcome = TurnOutcome(
            binding_id=turn.binding.binding_id,
            submission_id=submission_id,
            end_reason=ending.reason,
            reprompt=turn.reprompt,
            error=end.error,
            elapsed_s=time.monotonic() - started,
            received_at=turn.received_at,
            prompted_at=prompted,
            ended_at=time.monotonic(),
            switch_s=entered.elapsed_s if entered is not None else 0.0,
            switched=entered is not None and entered.switched,
        )
        if entered is not None and entered.session is not None and ending.counted != "aborted":
            await self._parts.compactor.keep_bounded(tau, entered.session.session_id)
        return outcome

    async def _submit(self, tau: TauProcess, turn: PendingTurn, submission_id: str) -> None:
        params = prompt_params(turn.text, submission_id, turn.correlation)
        for attempt in itertools.count():
            try:
                self._last_prompt_written = time.monotonic()
                await tau.request("prompt", params)
                return
            except TauRpcError as exc:
                # Only this node prompts, so "a turn is already in flight" is τ still
                # unwinding the last turn after its agent_end (a few ms); wait it out,
                # never surface it.
                if exc.code != SUBMISSION_REJECTED:
                    raise
                self._stats.busy_retries += 1
                await asyncio.sleep(min(BUSY_RETRY_FIRST_S * 2**attempt, BUSY_RETRY_MAX_S))

    async def _await_end(
        self, tau: TauProcess, ended: asyncio.Future[WireEvent], turn: PendingTurn
    ) -> WireEvent:
        exited: asyncio.Future[Any] = asyncio.ensure_future(tau.exited.wait())
        self._yield = asyncio.Event()
        if self._admission.should_yield():
            self._yield.set()
        yielded: asyncio.Future[Any] = asyncio.ensure_future(self._yield.wait())
        try:
            done, _ = await asyncio.wait(
                {ended, exited, yielded},
                timeout=self.wall_clock_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if ended in done:
                return ended.result()
            if exited in done:
                raise TauExited(tau.returncode, tau.stderr_tail())
            return await self._abort(tau, turn, ended, exited, yielded=yielded in done)
        finally:
            exited.cancel()
            yielded.cancel()

    async def _abort(
        self, tau: TauProcess, turn: PendingTurn, ended: asyncio.Future[WireEvent],
        exited: asyncio.Future[Any], *, yielded: bool,
    ) -> WireEvent:  # fmt: skip
        """Over the wall clock, or speaking to a device that does not listen while others
        wait: interrupt the turn, never abandon it in flight."""
        if yielded:
            self._stats.yielded += 1
        why = abort_reason(
            yielded=yielded, device=turn.binding.device, wall_clock_s=self.wall_clock_s
        )
        log.warning("%s: turn %s aborted: %s", self.name, turn.binding.binding_id, why)
        with contextlib.suppress(AgentError):
            await tau.request("abort", {}, timeout_s=ABORT_GRACE_S)
        done, _ = await asyncio.wait(
            {ended, exited}, timeout=ABORT_GRACE_S, return_when=asyncio.FIRST_COMPLETED
        )
        await self._parts.answers.report(turn, "aborted", f"{why}, so it was stopped")
        if ended in done:
            end = ended.result()
            return end if end.end_reason == "aborted" else _aborted(end)
        # The turn would not unwind: a hard kill; the supervisor restarts τ.
        tau.kill()
        await tau.exited.wait()
        return WireEvent(type="agent_end", end_reason="aborted", is_error=True)


def _aborted(end: WireEvent) -> WireEvent:
    return WireEvent(
        type=end.type,
        submission_id=end.submission_id,
        end_reason="aborted",
        is_error=end.is_error,
        error=end.error,
        raw=end.raw,
    )
