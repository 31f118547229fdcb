"""What the reflex records: typed search, use and evaluation records, and the ledger.

The same record goes three ways: into the τ session as a custom entry, onto the bus as
a past-tense report (``out.recall.<device>``, ``out.memorize.<device>``, the types of
:mod:`shared.messages.memory`) and into the ledger, a JSON-lines file
:mod:`home.memory.calibrate` reads back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from home.memory.errors import LedgerError, LedgerUnreadable
from home.memory.extract import ExtractionPath
from home.memory.kinds import MemoryKind

RECALL_ENTRY = "memory_recall"
USE_ENTRY = "memory_use"
MEMORIZE_ENTRY = "memory_memorize"

EvaluationStatus = Literal["started", "deposited", "nothing", "evaluator_busy", "failed"]
DepositAction = Literal["created", "corrected", "superseded", "reinforced"]


@dataclass(frozen=True)
class HitRecord:
    """One scored hit of one search."""

    id: int
    root: str
    score: float
    raw_score: float
    retrievability: float
    passed: bool
    age: str


@dataclass(frozen=True)
class SearchRecord:
    """One recall: the query, every score, how many passed (recorded even when none did)."""

    search_id: str
    when: str
    binding_id: str | None
    query: str
    roots: list[str]
    threshold: float
    hits: list[HitRecord]
    passed: int
    injected_ids: list[int]
    latency_ms: float
    errors: list[str] = field(default_factory=list)
    # The query said again with the entities it names both ways, searched as well.
    expanded_query: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``kind`` for the ledger."""
        return {"kind": "search", **asdict(self)}

    @property
    def failed_roots(self) -> list[str]:
        """The roots that failed or timed out (each error reads ``root: reason``)."""
        return [error.split(": ", 1)[0] for error in self.errors]

    @property
    def scores(self) -> list[float]:
        """Every hit's (decayed) score, best first."""
        return [h.score for h in self.hits]


@dataclass(frozen=True)
class UseRecord:
    """Which injected memories the turn's reply used (read at the end of the turn)."""

    search_id: str
    when: str
    used_ids: list[int]
    unused_ids: list[int]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``kind`` for the ledger."""
        return {"kind": "use", **asdict(self)}


@dataclass(frozen=True)
class DepositRecord:
    """What happened to one fact the evaluator kept."""

    fact: str
    action: DepositAction
    id: int
    supersedes: int | None
    nearest_score: float | None
    path: ExtractionPath | None = None  # how the fact was written (:mod:`home.memory.extract`)
    # What the knowledge book recorded of it (:mod:`home.memory.knowledge`), or why not.
    knowledge: str | None = None
    kind: MemoryKind | None = None  # what kind of memory was written (:mod:`home.memory.kinds`)


@dataclass(frozen=True)
class RefusalRecord:
    """A memory the fidelity check refused: never stored, and why."""

    memory: str
    path: ExtractionPath
    invented: list[str]


@dataclass(frozen=True)
class GateRecord:
    """The keep gate's verdict on one utterance of an evaluation's window."""

    utterance: str
    keep: bool
    score: float
    # Kept though the gate scored it under its boundary: it corrects a recalled memory.
    correction: bool = False


@dataclass(frozen=True)
class EvaluationRecord:
    """One evaluation (or one refused for overlap: ``evaluator_busy``)."""

    evaluation_id: str
    when: str
    binding_id: str | None
    status: EvaluationStatus
    position: str | None
    user_turn: int
    memory_root: str
    deposits: list[DepositRecord] = field(default_factory=list)
    busy_with: str | None = None
    error: str | None = None
    elapsed_ms: float | None = None
    answer: str | None = None  # the evaluator's own words, cut short: what the facts came from
    # The keep gate's verdicts (utterance form only): a skipped utterance is never evaluated.
    gated: list[GateRecord] = field(default_factory=list)
    # Memories written but refused: a content word in none of their sources.
    refused: list[RefusalRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``kind`` for the ledger."""
        return {"kind": "evaluation", **asdict(self)}

    @property
    def skipped(self) -> int:
        """How many utterances the keep gate skipped."""
        return sum(not g.keep for g in self.gated)

    @property
    def document_ids(self) -> list[int]:
        """Every document this evaluation wrote or found already stored."""
        return [d.id for d in self.deposits]


class Ledger:
    """Append-only JSON lines; one ``write`` is one line, flushed."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, record: dict[str, Any]) -> None:
        """Append one record."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot append to the ledger: {exc}") from exc

    def read(self) -> list[dict[str, Any]]:
        """Every record; a malformed line is a LedgerError naming its line number."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise LedgerUnreadable(f"{self.path}: cannot read the ledger: {exc}") from exc
        records = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LedgerUnreadable(f"{self.path}:{number}: not JSON: {exc.msg}") from exc
            if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
                raise LedgerUnreadable(f"{self.path}:{number}: expected an object with a 'kind'")
            records.append(record)
        return records
