"""``home memory due``: which memories are about to fall below the recall gate. Pure.

On a decaying root a hit passes when ``cosine × R ≥ threshold`` (:mod:`home.memory.recall`),
and R falls with time since the last review (:mod:`home.memory.fsrs`). A memory's
*reference score* is the best cosine score it has had in a recorded search (the ledger),
or 1.0 if none recorded it: its best case. It is due when, within the horizon, even that
score times R drops below the threshold: unless it is recalled and used before then, a
question about it will no longer bring it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from home.memory.fsrs import FACTOR, ReviewBook, days_between

DEFAULT_HORIZON_DAYS = 1.0


@dataclass(frozen=True)
class DueMemory:
    """One memory's standing against the gate."""

    id: int
    content: str
    retrievability: float
    reference_score: float
    stability_days: float
    days_left: float  # until reference × R < threshold; 0 when already below

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, rounded."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def best_scores(ledger: Iterable[dict[str, Any]]) -> dict[int, float]:
    """The best raw cosine score each memory had in the ledger's recorded searches."""
    best: dict[int, float] = {}
    for record in ledger:
        if record.get("kind") != "search":
            continue
        for hit in record.get("hits") or []:
            doc, score = hit.get("id"), hit.get("raw_score")
            if isinstance(doc, int) and isinstance(score, int | float):
                best[doc] = max(best.get(doc, 0.0), float(score))
    return best


def days_until(retention: float, stability_days: float) -> float:
    """Days after the last review at which R falls to ``retention`` (inverse of FSRS's R)."""
    if retention >= 1.0:
        return 0.0
    if retention <= 0.0:
        return float("inf")
    return stability_days * (retention**-2 - 1.0) / FACTOR


def due_memories(
    memories: Iterable[tuple[int, str, datetime]],
    book: ReviewBook,
    *,
    references: dict[int, float],
    threshold: float,
    now: datetime,
    horizon: timedelta = timedelta(days=DEFAULT_HORIZON_DAYS),
) -> list[DueMemory]:
    """The memories that fall below the gate within ``horizon`` of ``now``, soonest first."""
    due = []
    for doc_id, content, written_at in memories:
        state = book.state(doc_id, written_at)
        reference = references.get(doc_id, 1.0)
        elapsed = days_between(datetime.fromisoformat(state.last_review), now)
        # R must stay at or above threshold / reference for a question to recall it.
        floor = threshold / reference if reference > 0 else float("inf")
        left = max(days_until(floor, state.stability_days) - elapsed, 0.0)
        if left * 86_400 > horizon.total_seconds():
            continue
        due.append(
            DueMemory(
                id=doc_id,
                content=content,
                retrievability=state.retrievability_at(now),
                reference_score=reference,
                stability_days=state.stability_days,
                days_left=left,
            )
        )
    return sorted(due, key=lambda d: (d.days_left, d.id))
