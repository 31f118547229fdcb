"""The memory reflex's past-tense reports: ``out.recall.<device>`` and ``out.memorize.<device>``.

A recall report says what one search found and how much of it passed; a memorize
report says what one evaluation kept. Both are read on home's own NATS only (they
carry memory text, and no home half exports them); docs/architecture.md, "Memory".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages import fields
from shared.messages.message import PayloadMessage

RECALL_EVENT = "memory.recall"
MEMORIZE_EVENT = "memory.memorize"

# A report's summary is a one-line annotation, never a wall of JSON.
SUMMARY_CHARS = 160


@dataclass(frozen=True)
class RecallQuery:
    """One root searched, and the query it was searched with."""

    root: str
    query: str


@dataclass(frozen=True)
class RecallReport(PayloadMessage):
    """One recall: every score, the documents, how many passed the threshold."""

    EVENT_TYPE: ClassVar[str] = RECALL_EVENT

    search_id: str
    queries: tuple[RecallQuery, ...]
    scores: tuple[float, ...]
    document_ids: tuple[int, ...]
    injected_ids: tuple[int, ...]
    passed: int
    threshold: float
    latency_ms: float
    errors: tuple[str, ...] = ()
    failed_roots: tuple[str, ...] = ()
    agent: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The report's payload."""
        payload: dict[str, Any] = {} if self.agent is None else {"agent": self.agent}
        payload.update(
            search_id=self.search_id,
            queries=[{"root": q.root, "query": q.query} for q in self.queries],
            scores=list(self.scores),
            document_ids=list(self.document_ids),
            injected_ids=list(self.injected_ids),
            passed=self.passed,
            threshold=self.threshold,
            latency_ms=self.latency_ms,
            errors=list(self.errors),
            failed_roots=list(self.failed_roots),
        )
        return payload

    @classmethod
    def from_event(cls, event: Event) -> RecallReport:
        """Parse a recall report; ``EnvelopeError`` names the malformed key."""
        p = event.payload
        queries = [
            RecallQuery(fields.item_string(q, "root", where), fields.item_string(q, "query", where))
            for where, q in fields.objects(p, "queries")
        ]
        return cls(
            search_id=fields.string(p, "search_id"),
            queries=tuple(queries),
            scores=_numbers(p, "scores"),
            document_ids=_ints(p, "document_ids"),
            injected_ids=_ints(p, "injected_ids"),
            passed=_required_int(p, "passed"),
            threshold=_required_number(p, "threshold"),
            latency_ms=_required_number(p, "latency_ms"),
            errors=_strings(p, "errors"),
            failed_roots=_strings(p, "failed_roots"),
            agent=fields.opt_string(p, "agent"),
        )


@dataclass(frozen=True)
class Deposit:
    """What happened to one kept fact: its document, the action, what it replaced."""

    id: int
    action: str
    supersedes: int | None = None
    # How the memory was written: "draft" (the user's words) or "model" (a model's, checked).
    path: str | None = None
    # What the knowledge book recorded of it ("sister ana · lives in · Lyon (#4, closes #1)"),
    # or why it recorded nothing ("unrecorded: ..."); None when it makes no claim.
    knowledge: str | None = None
    # The memory's kind (fact, preference, routine, event, person); None for a reinforcement.
    kind: str | None = None


@dataclass(frozen=True)
class Refusal:
    """A memory the fidelity check refused: its text, how it was written, the words nobody said."""

    memory: str
    path: str
    invented: tuple[str, ...]


@dataclass(frozen=True)
class GateVerdict:
    """The keep gate's verdict on one utterance."""

    keep: bool
    score: float


@dataclass(frozen=True)
class TurnMemory:
    """One memory a turn produced, as its memorize report tells it."""

    id: int
    action: str
    fact: str
    supersedes: int | None
    kind: str | None = None
    # What the knowledge book recorded of it (``Deposit.knowledge``).
    knowledge: str | None = None


@dataclass(frozen=True)
class MemorizeReport(PayloadMessage):
    """One evaluation: its status, the facts kept (``queries``) and what became of each."""

    EVENT_TYPE: ClassVar[str] = MEMORIZE_EVENT

    evaluation_id: str
    status: str
    memory_root: str
    queries: tuple[str, ...] = ()
    scores: tuple[float | None, ...] = ()
    document_ids: tuple[int, ...] = ()
    deposits: tuple[Deposit, ...] = ()
    skipped: int = 0
    gate: tuple[GateVerdict, ...] = ()
    refused: tuple[Refusal, ...] = ()
    busy_with: str | None = None
    answer: str | None = None
    error: str | None = None
    elapsed_ms: float | None = None
    agent: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The report's payload."""
        payload: dict[str, Any] = {} if self.agent is None else {"agent": self.agent}
        payload.update(
            evaluation_id=self.evaluation_id,
            status=self.status,
            memory_root=self.memory_root,
            queries=list(self.queries),
            scores=list(self.scores),
            document_ids=list(self.document_ids),
            deposits=[
                {
                    "id": d.id,
                    "action": d.action,
                    "supersedes": d.supersedes,
                    "path": d.path,
                    "knowledge": d.knowledge,
                    "kind": d.kind,
                }
                for d in self.deposits
            ],
            skipped=self.skipped,
            gate=[{"keep": g.keep, "score": g.score} for g in self.gate],
            refused=[
                {"memory": r.memory, "path": r.path, "invented": list(r.invented)}
                for r in self.refused
            ],
            busy_with=self.busy_with,
            answer=self.answer,
            error=self.error,
            elapsed_ms=self.elapsed_ms,
        )
        return payload

    @classmethod
    def from_event(cls, event: Event) -> MemorizeReport:
        """Parse a memorize report; ``EnvelopeError`` names the malformed key."""
        p = event.payload
        deposits = []
        for where, deposit in fields.objects(p, "deposits"):
            supersedes = deposit.get("supersedes")
            if supersedes is not None and not _is_int(supersedes):
                raise EnvelopeError(
                    fields.payload_key(f"{where}.supersedes"),
                    f"must be an integer or null, got {supersedes!r:.60}",
                )
            ident = deposit.get("id")
            if not isinstance(ident, int) or isinstance(ident, bool):
                raise EnvelopeError(
                    fields.payload_key(f"{where}.id"), f"must be an integer, got {ident!r:.60}"
                )
            path = fields.opt_item_string(deposit, "path", where)
            knowledge = fields.opt_item_string(deposit, "knowledge", where)
            kind = fields.opt_item_string(deposit, "kind", where)
            action = fields.item_string(deposit, "action", where)
            deposits.append(Deposit(ident, action, supersedes, path, knowledge, kind))
        gate = []
        for where, verdict in fields.objects(p, "gate"):
            keep = verdict.get("keep")
            if not isinstance(keep, bool):
                raise EnvelopeError(
                    fields.payload_key(f"{where}.keep"), f"must be true or false, got {keep!r:.60}"
                )
            score = fields.opt_number(verdict, "score", path=fields.payload_key(f"{where}.score"))
            gate.append(GateVerdict(keep, 0.0 if score is None else score))
        refused = []
        for where, refusal in fields.objects(p, "refused"):
            invented = _strings(refusal, "invented", where)
            refused.append(
                Refusal(
                    fields.item_string(refusal, "memory", where),
                    fields.item_string(refusal, "path", where),
                    invented,
                )
            )
        skipped = fields.opt_int(p, "skipped")
        return cls(
            evaluation_id=fields.string(p, "evaluation_id"),
            status=fields.string(p, "status"),
            memory_root=fields.string(p, "memory_root"),
            queries=_strings(p, "queries"),
            scores=_opt_numbers(p, "scores"),
            document_ids=_ints(p, "document_ids"),
            deposits=tuple(deposits),
            skipped=0 if skipped is None else skipped,
            gate=tuple(gate),
            refused=tuple(refused),
            busy_with=fields.opt_string(p, "busy_with"),
            answer=fields.opt_string(p, "answer"),
            error=fields.opt_string(p, "error"),
            elapsed_ms=fields.opt_number(p, "elapsed_ms"),
            agent=fields.opt_string(p, "agent"),
        )

    def memories(self) -> list[TurnMemory]:
        """The memories the deposits wrote (``reinforced`` ones left out: nothing new was
        written; ``unchanged`` is what releases before said), each with its fact."""
        return [
            TurnMemory(
                d.id,
                d.action,
                self.queries[i] if i < len(self.queries) else "",
                d.supersedes,
                d.kind,
                d.knowledge,
            )
            for i, d in enumerate(self.deposits)
            if d.action not in ("reinforced", "unchanged")
        ]


def memory_summary(kind: str, payload: dict[str, Any]) -> str:
    """One short line saying what a recall or memorize report says, whatever its shape.

    ``text`` when the report carries one, else a line built from ``query``, ``passed``
    and the hits or scores, else the compact payload.
    """
    text = payload.get("text")
    if isinstance(text, str) and text.strip():
        return _clip(text.strip())
    parts: list[str] = []
    query = payload.get("query")
    if isinstance(query, str) and query:
        parts.append(f"query {query!r}")
    hits = payload.get("hits", payload.get("scores", payload.get("items")))
    passed = payload.get("passed")
    if isinstance(passed, int) and isinstance(hits, list):
        parts.append(f"{passed} of {len(hits)} passed")
    elif isinstance(passed, int):
        parts.append(f"{passed} passed")
    elif isinstance(hits, list):
        parts.append(f"{len(hits)} item(s)")
    if parts:
        return _clip(f"{kind}: " + ", ".join(parts))
    return _clip(f"{kind}: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")))


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= SUMMARY_CHARS:
        return one_line
    return one_line[: SUMMARY_CHARS - 1] + "…"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _required_int(payload: dict[str, Any], key: str) -> int:
    value = fields.opt_int(payload, key)
    if value is None:
        raise EnvelopeError(fields.payload_key(key), "is required but missing")
    return value


def _required_number(payload: dict[str, Any], key: str) -> float:
    value = fields.opt_number(payload, key)
    if value is None:
        raise EnvelopeError(fields.payload_key(key), "is required but missing")
    return value


def _strings(payload: dict[str, Any], key: str, where: str | None = None) -> tuple[str, ...]:
    """A JSON array of strings; errors name ``payload.[<where>.]<key>[i]``."""
    values = fields.array(payload, key)
    named = key if where is None else f"{where}.{key}"
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise EnvelopeError(
                fields.payload_key(f"{named}[{i}]"), f"must be a string, got {value!r:.60}"
            )
    return tuple(values)


def _ints(payload: dict[str, Any], key: str) -> tuple[int, ...]:
    values = fields.array(payload, key)
    for i, value in enumerate(values):
        if not _is_int(value):
            raise EnvelopeError(
                fields.payload_key(f"{key}[{i}]"), f"must be an integer, got {value!r:.60}"
            )
    return tuple(values)


def _opt_numbers(payload: dict[str, Any], key: str) -> tuple[float | None, ...]:
    values = fields.array(payload, key)
    return tuple(
        fields.opt_number({key: v}, key, path=fields.payload_key(f"{key}[{i}]"))
        for i, v in enumerate(values)
    )


def _numbers(payload: dict[str, Any], key: str) -> tuple[float, ...]:
    found = _opt_numbers(payload, key)
    for i, value in enumerate(found):
        if value is None:
            raise EnvelopeError(fields.payload_key(f"{key}[{i}]"), "must be a number, got null")
    return tuple(v for v in found if v is not None)
