"""The two halves of the reflex over JMFTS, free of τ: ``Recaller`` and ``Depositor``.

The τ extension (:mod:`home.tau_extensions.memory_reflex`) wires them to hooks; the tests and
the benchmark drive them directly, so the latency measured is the latency the hook adds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from home.jmfts.errors import JmftsError
from home.memory.config import ReflexConfig, RootSpec
from home.memory.correction import read_slot
from home.memory.errors import MemoryReflexError
from home.memory.evaluator import Decision, decide, normalized
from home.memory.extract import Extracted
from home.memory.fsrs import ReviewBook
from home.memory.heads import read_claim, swapped_value
from home.memory.kinds import kind_of
from home.memory.knowledge import KnowledgeBook, Plan, expanded_query
from home.memory.memories import MemoryStore, StoredMemory
from home.memory.provenance import Provenance
from home.memory.recall import ScoredHit, gate, threaded
from home.memory.records import DepositAction, DepositRecord, HitRecord, SearchRecord

DEDUP_NEIGHBOURS = 5
# A correction's candidates: stored memories nearest to the fact's slot phrase.
SLOT_NEIGHBOURS = 5
#: Candidates a recall ranks per memory it may show: decay can only choose among
#: memories the search found.
CANDIDATES_PER_SHOWN = 2

Clock = Callable[[], datetime]
log = logging.getLogger(__name__)


def now_utc() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(UTC)


class Recaller:
    """Search every configured root for an utterance, rank the hits and gate them.

    ``clock`` is the time decay is reckoned at (the life benchmark injects one).
    """

    def __init__(
        self, config: ReflexConfig, store: MemoryStore, reviews: ReviewBook, clock: Clock = now_utc
    ) -> None:
        self.config = config
        self.store = store
        self.reviews = reviews
        self.clock = clock
        self._decays = {root.path: root.decay for root in config.roots}
        self.knowledge = (
            KnowledgeBook(store.client, config.knowledge_root)
            if config.knowledge_root is not None
            else None
        )

    async def _expanded(self, query: str) -> str | None:
        """The query with the entities it names said both ways (by relation and by name:
        :func:`home.memory.knowledge.expanded_query`), when the knowledge book knows any."""
        if self.knowledge is None:
            return None
        try:
            return expanded_query(query, await self.knowledge.entities())
        except JmftsError:
            return None  # no knowledge root granted: recall by the words alone

    async def _search_root(
        self, root: RootSpec, queries: list[str]
    ) -> list[tuple[str, StoredMemory]]:
        root_id = await self.store.resolve(root.path)
        wanted = self.config.k * (CANDIDATES_PER_SHOWN if root.decay else 1)
        best: dict[int, StoredMemory] = {}
        for query in queries:
            for hit in await self.store.vector_search(query, root_id, wanted, root.kinds):
                if hit.id not in best or hit.score > best[hit.id].score:
                    best[hit.id] = hit
        hits = sorted(best.values(), key=lambda m: -m.score)[:wanted]
        return [(root.path, hit) for hit in hits]

    def _retrievability(self, root: str, memory: StoredMemory, now: datetime) -> float:
        if not self._decays.get(root, False):
            return 1.0
        return self.reviews.retrievability(memory.id, memory.written_at, now)

    async def recall(
        self, query: str, *, binding_id: str | None = None
    ) -> tuple[SearchRecord, list[ScoredHit]]:
        """Search, gate, and return the record (every score) and the hits to thread in.

        A root that fails (unreachable, not granted) is named in ``errors`` and the
        others still count: recall never raises into the turn.
        """
        started = time.perf_counter()
        now = self.clock()
        expanded = await self._expanded(query)
        queries = [query] if expanded is None else [query, expanded]
        results = await asyncio.gather(
            *(
                asyncio.wait_for(self._search_root(root, queries), self.config.search_timeout_s)
                for root in self.config.roots
            ),
            return_exceptions=True,
        )
        hits: list[tuple[str, StoredMemory]] = []
        errors: list[str] = []
        for root, result in zip(self.config.roots, results, strict=True):
            if isinstance(result, JmftsError):
                errors.append(f"{root.path}: {result}")
            elif isinstance(result, TimeoutError):
                errors.append(f"{root.path}: no answer within {self.config.search_timeout_s:g}s")
            elif isinstance(result, BaseException):
                raise result
            else:
                hits.extend(result)
        scored = gate(
            hits,
            self.config.threshold,
            lambda r, m: self._retrievability(r, m, now),
            self.config.k * len(self.config.roots),
        )
        shown = threaded(scored)
        record = SearchRecord(
            search_id=uuid.uuid4().hex,
            when=now.isoformat(),
            binding_id=binding_id,
            query=query,
            roots=[root.path for root in self.config.roots],
            threshold=self.config.threshold,
            hits=[
                HitRecord(
                    id=h.memory.id,
                    root=h.root,
                    score=round(h.score, 6),
                    raw_score=round(h.raw_score, 6),
                    retrievability=round(h.retrievability, 6),
                    passed=h.passed,
                    age=h.memory.age,
                )
                for h in scored
            ],
            passed=len(shown),
            injected_ids=[h.memory.id for h in shown],
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            errors=errors,
            expanded_query=expanded,
        )
        return record, shown

    def review(self, shown: list[ScoredHit], used_ids: set[int]) -> None:
        """Review every shown memory the answer used (on a decaying root); the others are
        left as they were."""
        now = self.clock()
        for hit in shown:
            if hit.memory.id in used_ids and self._decays.get(hit.root, False):
                self.reviews.review(hit.memory.id, hit.memory.written_at, now)


class Depositor:
    """Write facts under the agent's memory root, deduplicated against what is stored.

    A fact said again reinforces the memory it restates: a review in ``reviews``, at
    ``clock``'s time, which also stamps what is written (its event time). With a
    ``knowledge_root`` each fact's claim is also kept as a triple
    (:mod:`home.memory.knowledge`), and a claim that closes an open belief corrects the
    memory that belief was said in.
    """

    def __init__(
        self,
        config: ReflexConfig,
        store: MemoryStore,
        reviews: ReviewBook,
        clock: Clock = now_utc,
    ) -> None:
        self.config = config
        self.store = store
        self.reviews = reviews
        self.clock = clock
        self.knowledge = (
            KnowledgeBook(store.client, config.knowledge_root)
            if config.knowledge_root is not None
            else None
        )

    async def _plan(self, fact: str) -> tuple[Plan | None, str | None]:
        """The knowledge book's plan for ``fact``'s claim, or why there is none to record
        (the book's failure never costs the memory)."""
        claim = read_claim(fact)
        if self.knowledge is None or claim is None:
            return None, None
        try:
            return await self.knowledge.plan(claim), None
        except JmftsError as exc:
            log.warning("knowledge %s: not recorded: %s", self.config.knowledge_root, exc)
            return None, f"unrecorded: {exc}"

    async def _commit(self, plan: Plan | None, evidence_id: int) -> str | None:
        if plan is None or self.knowledge is None:
            return None
        try:
            change = await self.knowledge.commit(plan, evidence_id, self.clock())
        except JmftsError as exc:
            log.warning("knowledge %s: not recorded: %s", self.config.knowledge_root, exc)
            return f"unrecorded: {exc}"
        return None if change is None else change.describe()

    async def _candidates(self, fact: str, root_id: int) -> list[StoredMemory]:
        """The stored memories a fact may repeat or correct, best first.

        Searched by the fact and by its slot's words ("The user's dog is called"): a
        correction can score low against the fact it replaces (another name, another
        place), and the slot phrase finds it whatever its value.
        """
        found = {m.id: m for m in await self.store.vector_search(fact, root_id, DEDUP_NEIGHBOURS)}
        slot = read_slot(fact)
        if slot is not None:
            for memory in await self.store.vector_search(slot.phrase, root_id, SLOT_NEIGHBOURS):
                found.setdefault(memory.id, replace(memory, score=0.0))
        return sorted(found.values(), key=lambda m: -m.score)

    async def deposit(
        self, memories: list[Extracted], origin: Provenance | None = None
    ) -> list[DepositRecord]:
        """Deposit each faithful memory (in order): a restatement reinforces the memory it
        restates, a correction or a near-duplicate that adds words supersedes what it
        replaces, anything else is created. Each written record's provenance names what
        it was written from and how."""
        root_id = await self.store.resolve(self.config.memory_root)
        records = []
        for memory in memories:
            if not memory.faithful:
                raise MemoryReflexError(
                    f"refusing to deposit {memory.memory!r}: words nobody said: "
                    + ", ".join(memory.invented)
                )
            fact = memory.memory
            nearest = await self._candidates(fact, root_id)
            plan, unrecorded = await self._plan(fact)
            replaces = plan.claim.replaces if plan is not None else None
            decision = decide(fact, nearest, self.config.dedup_threshold, replaces)
            if plan is not None and plan.corrects is not None and decision.action == "create":
                # A claim with the head of an open belief and another value: whatever
                # words either was said in, the memory that belief came from is replaced.
                decision = Decision("correct", await self.store.get(plan.corrects))
            if decision.action == "reinforce" and decision.existing is not None:
                existing = decision.existing
                self.reviews.review(existing.id, existing.written_at, self.clock())
                records.append(
                    DepositRecord(
                        fact, "reinforced", existing.id, None, decision.nearest_score, memory.path
                    )
                )
                continue
            old = decision.existing.id if decision.existing is not None else None
            recalled = memory.recalled
            if decision.action == "correct" and decision.existing is not None and plan:
                swapped = _restated(decision.existing.content, plan)
                if swapped is not None:
                    fact, recalled = swapped, (*recalled, decision.existing.content)
            thread = None
            if origin is not None:
                thread = replace(
                    origin, said=memory.said, recalled=recalled, extracted_by=memory.path
                )
            kind = kind_of(fact, plan.claim if plan is not None else None)
            written = await self.store.deposit(
                root_id,
                fact,
                supersedes=old,
                origin=thread,
                event_time=self.clock(),
                kind=kind,
                about=_about(fact, plan),
            )
            action: DepositAction = _ACTIONS[decision.action]
            knowledge = unrecorded or await self._commit(plan, written.id)
            records.append(
                DepositRecord(
                    fact,
                    action,
                    written.id,
                    old,
                    decision.nearest_score,
                    memory.path,
                    knowledge,
                    kind,
                )
            )
        return records


def _about(fact: str, plan: Plan | None) -> str | None:
    """Who ``fact`` is about, when the knowledge book resolved its subject to someone
    the words name by neither name nor relation ("he's a software tester now": "husband
    kwame"); a memory that names them is found by its own words."""
    entity = plan.entity if plan is not None else None
    if entity is None or entity.kind == "user":
        return None
    said = normalized(fact)
    named = any(
        re.search(rf"\b{re.escape(normalized(n))}\b", said) for n in entity.names + entity.relations
    )
    return None if named else entity.label


def _restated(corrected: str, plan: Plan) -> str | None:
    """The memory a correction corrects, with its old value said as the new one
    (:func:`home.memory.heads.swapped_value`), when the plan knows both values."""
    old = plan.closes.value if plan.closes is not None else plan.claim.replaces
    new = plan.claim.value
    if old is None or new is None:
        return None
    return swapped_value(corrected, old, new)


_ACTIONS: dict[str, DepositAction] = {
    "create": "created",
    "correct": "corrected",
    "supersede": "superseded",
}
