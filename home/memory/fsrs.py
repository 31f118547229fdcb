"""Review decay: FSRS retrievability, a memory's standing in time; review grows its stability.

R(t, S) = (1 + 19/81 · t/S)^(-1/2), with t the days since the memory was last reviewed
(or written) and S its stability in days: R is 0.9 when t = S, and it falls as a power
law, so an unreviewed memory sinks without ever reaching zero. R only ranks a memory
among the candidates of a recall (:mod:`home.memory.recall`); it never hides one.

A review is a success: a memory recalled *and used* by the answer, or restated by the
user, grows S by FSRS-4.5's rule (more the more overdue it was, R low) and restarts its
clock. A memory shown and left unused is no review at all: the question was about
something else, which says nothing about whether the memory is still known. The book of
review states is a small JSON file the reflex owns.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from home.memory.errors import LedgerError, LedgerUnreadable
from shared.files import write_atomic

FACTOR = 19.0 / 81.0
DECAY = -0.5
# FSRS-4.5 default weights used by the recall-success rule (w8, w9, w10).
W8, W9, W10 = 1.6474, 0.1367, 1.0461
# Difficulty is not modelled per memory: the middle of FSRS's 1..10 scale.
DIFFICULTY = 5.0
SECONDS_PER_DAY = 86_400.0


def retrievability(elapsed_days: float, stability_days: float) -> float:
    """FSRS's R after ``elapsed_days`` at stability ``stability_days`` (both > 0 or t = 0)."""
    if stability_days <= 0:
        raise ValueError(f"stability must be positive, got {stability_days}")
    return float((1.0 + FACTOR * max(elapsed_days, 0.0) / stability_days) ** DECAY)


def stability_after_success(stability_days: float, r: float) -> float:
    """S after a successful review at retrievability ``r`` (FSRS-4.5, grade Good)."""
    growth: float = (
        math.exp(W8)
        * (11.0 - DIFFICULTY)
        * stability_days ** (-W9)
        * (math.exp(W10 * (1.0 - r)) - 1.0)
    )
    return stability_days * (1.0 + growth)


def days_between(earlier: datetime, later: datetime) -> float:
    """Days from ``earlier`` to ``later`` (negative spans read as zero)."""
    return max((later - earlier).total_seconds(), 0.0) / SECONDS_PER_DAY


@dataclass
class ReviewState:
    """One memory's review clock."""

    stability_days: float
    last_review: str  # ISO-8601
    reviews: int = 0

    def retrievability_at(self, now: datetime) -> float:
        """R now."""
        return retrievability(
            days_between(datetime.fromisoformat(self.last_review), now), self.stability_days
        )


def _state(raw: Any) -> ReviewState:
    """A stored state; keys a book written by an earlier release has (``lapses``) are left."""
    return ReviewState(
        stability_days=float(raw["stability_days"]),
        last_review=str(raw["last_review"]),
        reviews=int(raw.get("reviews", 0)),
    )


class ReviewBook:
    """Review states by document id, kept in one JSON file (rewritten atomically)."""

    def __init__(self, path: Path, initial_stability_days: float) -> None:
        self.path = path
        self.initial_stability_days = initial_stability_days
        self._states: dict[int, ReviewState] = {}
        if path.exists():
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
                self._states = {int(k): _state(v) for k, v in raw.items()}
            except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
                raise LedgerUnreadable(f"{path}: unreadable review book: {exc}") from exc

    def state(self, doc_id: int, written_at: datetime) -> ReviewState:
        """The memory's clock; a memory never reviewed starts at its writing."""
        found = self._states.get(doc_id)
        if found is not None:
            return found
        return ReviewState(self.initial_stability_days, written_at.isoformat())

    def retrievability(self, doc_id: int, written_at: datetime, now: datetime) -> float:
        """R of the memory now."""
        return self.state(doc_id, written_at).retrievability_at(now)

    def review(self, doc_id: int, written_at: datetime, now: datetime) -> ReviewState:
        """Record one successful review (used by an answer, or restated): S grows and the
        clock restarts. Persisted before returning."""
        state = self.state(doc_id, written_at)
        r = state.retrievability_at(now)
        state.stability_days = stability_after_success(state.stability_days, r)
        state.reviews += 1
        state.last_review = now.isoformat()
        self._states[doc_id] = state
        self._save()
        return state

    def _save(self) -> None:
        try:
            write_atomic(
                self.path, json.dumps({str(k): asdict(v) for k, v in self._states.items()})
            )
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot write the review book: {exc}") from exc
