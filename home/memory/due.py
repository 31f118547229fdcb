"""``home memory due``: which memories are due for review, and how far they have sunk. Pure.

Decay never hides a memory: on a decaying root its FSRS retrievability R
(:mod:`home.memory.fsrs`) only weighs its rank among a recall's candidates
(:func:`home.memory.recall.rank_weight`). FSRS schedules a review when R falls to
``RETENTION`` (0.9, reached when the days since the last review equal the stability): a
memory is due when that happens within the horizon. Recalled and used, or restated by
the user, its clock starts again and its stability grows; left alone, it sinks in rank
toward the floor, never out of reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from home.memory.fsrs import FACTOR, ReviewBook, days_between
from home.memory.recall import rank_weight

DEFAULT_HORIZON_DAYS = 1.0
#: The retrievability FSRS schedules a review at (its "desired retention").
RETENTION = 0.9


@dataclass(frozen=True)
class DueMemory:
    """One memory's standing in time."""

    id: int
    content: str
    retrievability: float
    rank_weight: float
    stability_days: float
    days_left: float  # until R falls to RETENTION; 0 when it already has

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, rounded."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def days_until(retention: float, stability_days: float) -> float:
    """Days after the last review at which R falls to ``retention`` (inverse of FSRS's R)."""
    if retention >= 1.0:
        return 0.0
    if retention <= 0.0:
        return float("inf")
    return stability_days * (retention**-2 - 1.0) / FACTOR


def written_memories(view: Iterable[dict[str, Any]]) -> list[tuple[int, str, datetime]]:
    """A workspace's current view (``GET /workspace/{id}``'s ``current``) as
    :func:`due_memories` reads it: id, text, and when written (its event time, else its
    creation; a naive time is UTC)."""
    out = []
    for item in view:
        stamp = item.get("event_time") or item.get("created_at")
        written = datetime.fromisoformat(stamp) if stamp else datetime.now(UTC)
        if written.tzinfo is None:
            written = written.replace(tzinfo=UTC)
        out.append((int(item["id"]), str(item.get("content") or ""), written))
    return out


def due_memories(
    memories: Iterable[tuple[int, str, datetime]],
    book: ReviewBook,
    *,
    now: datetime,
    horizon: timedelta = timedelta(days=DEFAULT_HORIZON_DAYS),
) -> list[DueMemory]:
    """The memories due for review within ``horizon`` of ``now``, soonest (most sunk) first."""
    due = []
    for doc_id, content, written_at in memories:
        state = book.state(doc_id, written_at)
        elapsed = days_between(datetime.fromisoformat(state.last_review), now)
        left = max(days_until(RETENTION, state.stability_days) - elapsed, 0.0)
        if left * 86_400 > horizon.total_seconds():
            continue
        r = state.retrievability_at(now)
        due.append(
            DueMemory(
                id=doc_id,
                content=content,
                retrievability=r,
                rank_weight=rank_weight(r),
                stability_days=state.stability_days,
                days_left=left,
            )
        )
    return sorted(due, key=lambda d: (d.days_left, d.retrievability, d.id))
