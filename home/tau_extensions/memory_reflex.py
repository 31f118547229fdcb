"""The memory reflex: recall before every user turn, memorize off the turn. Not tools.

Loaded by τ by path. Neither behaviour is a tool: the model can neither call nor
skip them.

- **Recall** (``before_agent_start``): before the model sees the utterance, every
  configured root is searched with ``/search/vector`` under the agent's own token;
  memories at or above the threshold are threaded *before* the utterance, oldest
  first, each with its age in words. Every search is recorded as a ``memory_recall``
  custom entry in the τ session (query, every score, how many passed), even when
  nothing passed, and reported on ``events.workspace.<agent>.out.recall.<device>``.
- **Memorize** (``user_turn_end``): every N user turns the hook captures the
  conversation's position and the utterances since the last evaluation, and returns
  at once; the evaluator names what is worth keeping, which is deposited under the
  agent's memory root, deduplicated. For a model without a grammar the evaluator is a
  forked sub-agent (τ ``spawn_branch``, no tools, no hooks) reading the conversation
  up to there; for a model that declares one (the embedded model) the keep gate
  (:mod:`home.memory.keep_gate`) skips what holds nothing worth keeping and each kept
  utterance is stored as its draft, the user's own words (:mod:`home.memory.extract`).
  A memory with a content word nobody said (nor recall showed) is refused, named in
  the report's ``refused``. One evaluator at a time: an overlap is
  recorded and reported as ``evaluator_busy``, never queued. Reports go to
  ``...out.memorize.<device>``.

Both reports are past tense; nothing binds them back into an agent (the activation
loader refuses such a binding). At the end of each turn the reflex reads which shown
memories the reply used (``memory_use``): that is the calibration data, and on a root
with ``decay: true`` it is the FSRS review that grows a memory's stability.

Config (``--ext-config memory_reflex:KEY=VALUE``): see :mod:`home.memory.config`;
run context ``agent``, ``nats_url``, ``binding_file``, ``jmfts_url``,
``jmfts_token_file`` comes from the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from home.jmfts.errors import JmftsError
from home.memory.config import ReflexConfig, parse_config
from home.memory.correction import revises_recalled
from home.memory.errors import MemoryReflexError
from home.memory.evaluator import (
    EVALUATOR_PROMPT,
    EVALUATOR_SYSTEM,
    MAX_FACTS,
    assistant_text,
    parse_facts,
)
from home.memory.extract import Extracted, drafted, from_model
from home.memory.fsrs import ReviewBook
from home.memory.keep_gate import KeepGate, load_keep_gate
from home.memory.memories import MemoryStore
from home.memory.provenance import Provenance
from home.memory.recall import ScoredHit, render_recall, used_by_reply
from home.memory.records import (
    MEMORIZE_ENTRY,
    RECALL_ENTRY,
    USE_ENTRY,
    EvaluationRecord,
    GateRecord,
    Ledger,
    RefusalRecord,
    SearchRecord,
    UseRecord,
)
from home.memory.reflex import Depositor, Recaller, now_utc
from home.tau_extensions.bus_link import BusLink
from home.tau_extensions.errors import ExtensionError
from home.tau_extensions.prose import assistant_prose
from shared.lifecycle import cancel_and_wait
from shared.messages.memory import (
    Deposit,
    GateVerdict,
    MemorizeReport,
    RecallQuery,
    RecallReport,
    Refusal,
)
from shared.subjects import memorize_subject, rail_pattern, recall_subject

TOUCHES_BUS = True
SUBJECTS = (rail_pattern("recall"), rail_pattern("memorize"))
RUN_CONTEXT = ("agent", "nats_url", "binding_file", "jmfts_url", "jmfts_token_file")

RECALL_MESSAGE_TYPE = "memory_recall"
EVALUATOR_LABEL = "memory_reflex evaluator"
ANSWER_CHARS = 500
# The recalled memories a window's facts may draw on (newest kept): a bound, not a budget.
MAX_RECALLED = 20

log = logging.getLogger(__name__)


@dataclass
class TurnRecall:
    """What this turn's recall showed, kept until the turn ends."""

    record: SearchRecord
    shown: list[ScoredHit]


class MemoryReflex:
    """The reflex of one agent inside its τ process."""

    def __init__(self, api: Any, config: ReflexConfig) -> None:
        self.api = api
        self.config = config
        self.link = BusLink(
            agent=config.agent,
            nats_url=config.nats_url,
            binding_file=config.binding_file,
            source=f"agent.{config.agent}.memory_reflex",
        )
        self.ledger = Ledger(config.ledger_path)
        self.reviews = ReviewBook(config.reviews_path, config.initial_stability_days)
        self.store: MemoryStore | None = None
        self.recaller: Recaller | None = None
        self.depositor: Depositor | None = None
        self.user_turns = 0
        self._pending: TurnRecall | None = None
        self._evaluator: asyncio.Task[None] | None = None
        self._evaluation_id: str | None = None
        self._keep_gate: KeepGate | None = None
        # The utterances not yet handed to an evaluator (kept across a busy refusal), and
        # what recall showed on their turns: the sources a model's fact is checked against.
        self._utterances: list[str] = []
        self._recalled: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Read the token, open the JMFTS client, connect to the bus."""
        try:
            token = self.config.jmfts_token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ExtensionError(
                "memory_reflex: cannot read the JMFTS token file "
                f"{self.config.jmfts_token_file}: {exc}"
            ) from exc
        self.store = MemoryStore(self.config.jmfts_url, token=token)
        self.recaller = Recaller(self.config, self.store, self.reviews)
        self.depositor = Depositor(self.config, self.store, self.reviews)
        await self.link.connect()

    async def close(self) -> None:
        """Cancel a running evaluator, then close the client and the bus."""
        task, self._evaluator = self._evaluator, None
        if task is not None:
            await cancel_and_wait(task)
        if self.store is not None:
            await self.store.close()
        await self.link.close()

    # -- reporting ---------------------------------------------------------------------

    def _binding_id(self) -> tuple[str | None, str | None]:
        try:
            binding = self.link.binding()
        except ExtensionError:
            return None, None
        return binding.binding_id, binding.device

    def _schema(self) -> str | None:
        """The activation schema that routed the turn in flight, if the node knows it."""
        try:
            return self.link.binding().schema
        except ExtensionError:
            return None

    def _reprompted(self) -> bool:
        """Whether the turn in flight is the node's own re-prompt rather than the user's words."""
        try:
            return self.link.binding().reprompt
        except ExtensionError:
            return False

    async def _report(
        self, subject_of: Callable[[str, str], str], report: RecallReport | MemorizeReport,
        device: str | None, binding_id: str | None,
    ) -> None:  # fmt: skip
        """Publish a past-tense report, if the turn has a device to name in the subject."""
        if device is None or binding_id is None:
            log.warning(
                "memory_reflex: no device for this turn; %s not published", report.event_type
            )
            return
        try:
            binding = self.link.binding()
            binding = replace(binding, binding_id=binding_id, device=device)
            event = self.link.event(report, binding)
            await self.link.publish(subject_of(self.config.agent, device), event)
        except (ExtensionError, MemoryReflexError) as exc:
            log.warning("memory_reflex: %s not published: %s", report.event_type, exc)

    # -- recall ------------------------------------------------------------------------

    async def on_before_agent_start(self, event: dict[str, Any], ctx: Any) -> dict[str, Any] | None:
        """Search, record, report; thread what passed ahead of the utterance."""
        if self.recaller is None:
            raise ExtensionError("memory_reflex: session_start has not run")
        query = str(event.get("prompt") or "")
        binding_id, device = self._binding_id()
        self._pending = None
        if not query.strip() or self._reprompted():
            return None
        self._utterances.append(query)
        await self._settle_evaluation()
        record, shown = await self.recaller.recall(query, binding_id=binding_id)
        self._pending = TurnRecall(record, shown)
        self._recalled.extend(h.memory.content for h in shown)
        del self._recalled[:-MAX_RECALLED]
        await self.api.append_entry(RECALL_ENTRY, record.to_dict())
        try:
            self.ledger.write(record.to_dict())
        except MemoryReflexError as exc:  # the session entry stands; the turn goes on
            log.warning("memory_reflex: %s", exc)
        await self._report(
            recall_subject,
            _recall_report(record, self.config.agent),
            device,
            binding_id,
        )
        if not shown and not record.errors:
            return None
        return {
            "message": {
                "customType": RECALL_MESSAGE_TYPE,
                "content": render_recall(shown, record.failed_roots),
                "display": True,
                "details": {"search_id": record.search_id, "ids": record.injected_ids},
                "position": "before_user",
            }
        }

    async def _settle_evaluation(self) -> None:
        """Wait (bounded) for an evaluation still running, so what was said a turn ago,
        a correction above all, is stored before this turn's recall searches."""
        task = self._evaluator
        if task is None or task.done() or self.config.evaluation_wait_s <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), self.config.evaluation_wait_s)

    async def _record_use(self, event: dict[str, Any]) -> None:
        pending, self._pending = self._pending, None
        if pending is None or not pending.shown:
            return
        reply = _reply_text(event.get("messages") or [])
        used = {
            h.memory.id
            for h in pending.shown
            if used_by_reply(h.memory.content, pending.record.query, reply)
        }
        use = UseRecord(
            search_id=pending.record.search_id,
            when=now_utc().isoformat(),
            used_ids=sorted(used),
            unused_ids=sorted(h.memory.id for h in pending.shown if h.memory.id not in used),
        )
        await self.api.append_entry(USE_ENTRY, use.to_dict())
        try:
            self.ledger.write(use.to_dict())
            if self.recaller is not None:
                self.recaller.review(pending.shown, used)
        except MemoryReflexError as exc:  # the session entry stands; the turn goes on
            log.warning("memory_reflex: %s", exc)

    # -- memorize ----------------------------------------------------------------------

    async def on_user_turn_end(self, event: dict[str, Any], ctx: Any) -> None:
        """Record which memories were used; every N turns, start (or refuse) an evaluation.

        The node's re-prompt is no user turn: it is neither counted nor evaluated.
        """
        if self._reprompted():
            return
        self.user_turns += 1
        await self._record_use(event)
        if self.config.every_n == 0 or self.user_turns % self.config.every_n != 0:
            return
        binding_id, device = self._binding_id()
        origin = Provenance(
            agent=self.config.agent,
            written_by=self.link.source,
            binding_id=binding_id,
            produced_by_schema=self._schema(),
        )
        position = ctx.cursor.leaf
        evaluation_id = uuid.uuid4().hex
        if self._evaluator is not None and not self._evaluator.done():
            busy = EvaluationRecord(
                evaluation_id=evaluation_id,
                when=now_utc().isoformat(),
                binding_id=binding_id,
                status="evaluator_busy",
                position=position,
                user_turn=self.user_turns,
                memory_root=self.config.memory_root,
                busy_with=self._evaluation_id,
            )
            await self._record_evaluation(busy, device)
            return
        self._evaluation_id = evaluation_id
        window, self._utterances = self._utterances[-MAX_FACTS:], []
        recalled, self._recalled = self._recalled[-MAX_RECALLED:], []
        # Off the turn: the hook returns now; the evaluator runs on its own cursor.
        self._evaluator = asyncio.create_task(
            self._evaluate(
                ctx,
                evaluation_id,
                position=position,
                window=window,
                recalled=recalled,
                origin=origin,
                device=device,
            ),
            name=f"memory_reflex-evaluator-{evaluation_id[:8]}",
        )

    async def _record_evaluation(self, record: EvaluationRecord, device: str | None) -> None:
        try:
            await self.api.append_entry(MEMORIZE_ENTRY, record.to_dict())
        except (RuntimeError, ValueError) as exc:
            log.warning("memory_reflex: evaluation entry not recorded in the session: %s", exc)
        try:
            self.ledger.write(record.to_dict())
        except MemoryReflexError as exc:  # off the turn: logged, and the report still goes out
            log.warning("memory_reflex: %s", exc)
        await self._report(
            memorize_subject,
            _memorize_report(record, self.config.agent),
            device,
            record.binding_id,
        )

    def _evaluator_model(self, ctx: Any) -> Any:
        """The configured model by name, else the session's own.

        The evaluator has no tools, so a ``tool_choice`` the agent's model forces on
        every request (the embedded llama.cpp model's speak grammar) is dropped for it.
        """
        if self.config.evaluator_model is not None:
            return self.config.evaluator_model
        model = ctx.resolve_model(None)
        extra = dict(getattr(model, "extra_body", None) or {})
        if "tool_choice" not in extra:
            return None
        extra.pop("tool_choice")
        return model.model_copy(update={"extra_body": extra})

    async def _branch_answer(self, ctx: Any, model: Any, position: str | None) -> str:
        """The conversation form: a forked sub-agent reads the conversation up to ``position``."""
        result = await ctx.spawn_branch(
            position,
            EVALUATOR_PROMPT,
            tools=[],
            model=model,
            max_turns=1,
            label=EVALUATOR_LABEL,
            system_prompt=EVALUATOR_SYSTEM,
            hooks=False,
        )
        if not result.ok:
            raise MemoryReflexError(f"the evaluator failed: {result.error}")
        return assistant_text(result.messages)

    async def _gate(self, window: list[str], recalled: list[str]) -> list[GateRecord]:
        """The keep gate's verdict on each utterance (the gate is built on first use); a
        correction of a memory recalled on the window's turns that the gate nearly
        skipped is kept (:func:`home.memory.correction.revises_recalled`)."""
        if self._keep_gate is None:
            # Off the turn, on a thread: loading MiniLM and embedding the examples takes ~1 s.
            self._keep_gate = await asyncio.to_thread(load_keep_gate)
        verdicts = await asyncio.to_thread(self._keep_gate.judge, window)
        records = []
        for utterance, verdict in zip(window, verdicts, strict=True):
            rescued = not verdict.keep and revises_recalled(utterance, verdict.score, recalled)
            records.append(
                GateRecord(utterance, verdict.keep or rescued, verdict.score, correction=rescued)
            )
        return records

    async def _evaluate(
        self, ctx: Any, evaluation_id: str, *, position: str | None, window: list[str],
        recalled: list[str], origin: Provenance, device: str | None,
    ) -> None:  # fmt: skip
        started = time.perf_counter()
        origin = replace(origin, evaluation_id=evaluation_id)
        base = EvaluationRecord(
            evaluation_id=evaluation_id,
            when=now_utc().isoformat(),
            binding_id=origin.binding_id,
            status="failed",
            position=position,
            user_turn=self.user_turns,
            memory_root=self.config.memory_root,
        )
        try:
            chosen = self._evaluator_model(ctx)
            model = ctx.resolve_model(chosen)
            extracted: list[Extracted]
            if getattr(model, "grammar_dialect", None) is None:
                answer = await self._branch_answer(ctx, chosen, position)
                extracted = from_model(parse_facts(answer), window, recalled)
            else:  # the embedded model: the kept utterances' drafts, no model asked
                base = replace(base, gated=await self._gate(window, recalled))
                extracted = [
                    e for g in base.gated if g.keep and (e := drafted(g.utterance)) is not None
                ]
                answer = "".join(f"- {e.memory}\n" for e in extracted)
            faithful = [e for e in extracted if e.faithful]
            base = replace(
                base,
                answer=answer[:ANSWER_CHARS],
                refused=[
                    RefusalRecord(e.memory, e.path, list(e.invented))
                    for e in extracted
                    if not e.faithful
                ],
            )
            for refused in base.refused:
                log.warning(
                    "memory_reflex: refused %r (%s): words nobody said: %s",
                    refused.memory, refused.path, ", ".join(refused.invented),
                )  # fmt: skip
            if not faithful or self.depositor is None:
                record = replace(base, status="nothing")
            else:
                deposits = await self.depositor.deposit(faithful, origin)
                record = replace(base, status="deposited", deposits=deposits)
        except (MemoryReflexError, JmftsError) as exc:
            record = replace(base, error=str(exc))
        except asyncio.CancelledError:
            raise
        # An evaluation failure is reported, never raised.
        except Exception as exc:  # noqa: BLE001
            record = replace(base, error=f"{type(exc).__name__}: {exc}")
        record = replace(record, elapsed_ms=round((time.perf_counter() - started) * 1000, 3))
        await self._record_evaluation(record, device)


def _recall_report(record: SearchRecord, agent: str) -> RecallReport:
    return RecallReport(
        search_id=record.search_id,
        queries=tuple(RecallQuery(root, record.query) for root in record.roots),
        scores=tuple(record.scores),
        document_ids=tuple(h.id for h in record.hits),
        injected_ids=tuple(record.injected_ids),
        passed=record.passed,
        threshold=record.threshold,
        latency_ms=record.latency_ms,
        errors=tuple(record.errors),
        failed_roots=tuple(record.failed_roots),
        agent=agent,
    )


def _memorize_report(record: EvaluationRecord, agent: str) -> MemorizeReport:
    return MemorizeReport(
        evaluation_id=record.evaluation_id,
        status=record.status,
        memory_root=record.memory_root,
        queries=tuple(d.fact for d in record.deposits),
        scores=tuple(d.nearest_score for d in record.deposits),
        document_ids=tuple(record.document_ids),
        deposits=tuple(
            Deposit(d.id, d.action, d.supersedes, d.path, d.knowledge, d.kind)
            for d in record.deposits
        ),
        skipped=record.skipped,
        gate=tuple(GateVerdict(g.keep, g.score) for g in record.gated),
        refused=tuple(Refusal(r.memory, r.path, tuple(r.invented)) for r in record.refused),
        busy_with=record.busy_with,
        answer=record.answer,
        error=record.error,
        elapsed_ms=record.elapsed_ms,
        agent=agent,
    )


def _reply_text(messages: list[Any]) -> str:
    """Everything the assistant said or spoke this turn (prose and speak arguments)."""
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        parts.append(assistant_prose(message).text)
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                arguments = block.get("arguments")
                if isinstance(arguments, dict):
                    parts.extend(str(v) for v in arguments.values() if isinstance(v, str))
    return "\n".join(parts)


def register(api: Any) -> None:
    """Wire the reflex to τ's hooks (no tools: the model can neither call nor skip it)."""
    config = parse_config(dict(api.config))
    reflex = MemoryReflex(api, config)

    async def on_session_start(event: dict[str, Any], ctx: Any) -> None:
        await reflex.start()

    async def on_session_shutdown(event: dict[str, Any], ctx: Any) -> None:
        await reflex.close()

    api.on("session_start", on_session_start)
    api.on("session_shutdown", on_session_shutdown)
    api.on("before_agent_start", reflex.on_before_agent_start)
    api.on("user_turn_end", reflex.on_user_turn_end)
    # The ledger directory is made now so a misconfigured path fails at load, not mid-turn.
    Path(config.state_dir).mkdir(parents=True, exist_ok=True)
