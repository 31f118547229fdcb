"""Which memories are due for review: FSRS retrievability against the review retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from home.memory.due import days_until, due_memories
from home.memory.fsrs import ReviewBook, retrievability
from home.memory.recall import RANK_FLOOR


def test_days_until_inverts_retrievability() -> None:
    for stability in (0.5, 3.0, 40.0):
        for retention in (0.9, 0.6, 0.45):
            t = days_until(retention, stability)
            assert retrievability(t, stability) == pytest.approx(retention)


def test_due_lists_what_falls_to_the_review_retention_within_the_horizon_most_sunk_first(
    tmp_path: Path,
) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    book = ReviewBook(tmp_path / "reviews.json", initial_stability_days=3.0)
    memories = [
        (1, "old", now - timedelta(days=10)),  # past its stability: R < 0.9 already
        (2, "new", now - timedelta(hours=1)),  # R reaches 0.9 in about three days
        (3, "older", now - timedelta(days=40)),
    ]
    soon = due_memories(memories, book, now=now, horizon=timedelta(days=1))
    assert [d.id for d in soon] == [3, 1]
    assert soon[0].days_left == 0.0 and soon[0].retrievability < soon[1].retrievability < 0.9
    assert soon[0].rank_weight == pytest.approx(
        RANK_FLOOR + (1 - RANK_FLOOR) * soon[0].retrievability
    )
    week = due_memories(memories, book, now=now, horizon=timedelta(days=7))
    assert [d.id for d in week] == [3, 1, 2]
    assert 2.0 < week[2].days_left <= 3.0


def test_a_used_memory_is_due_later(tmp_path: Path) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    written = now - timedelta(days=2)
    book = ReviewBook(tmp_path / "reviews.json", initial_stability_days=3.0)
    memories = [(7, "the user's dog is called Rex", written)]

    def left() -> float:
        (due,) = due_memories(memories, book, now=now, horizon=timedelta(days=365))
        return due.days_left

    before = left()
    book.review(7, written, now)
    assert left() > before
