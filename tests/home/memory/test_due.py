"""Which memories fall below the recall gate soon: FSRS retrievability against the threshold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from home.memory.due import best_scores, days_until, due_memories
from home.memory.fsrs import ReviewBook, retrievability


def test_days_until_inverts_retrievability() -> None:
    for stability in (0.5, 3.0, 40.0):
        for retention in (0.9, 0.6, 0.45):
            t = days_until(retention, stability)
            assert retrievability(t, stability) == pytest.approx(retention)


def test_the_best_recorded_score_is_each_memorys_reference() -> None:
    ledger = [
        {"kind": "search", "hits": [{"id": 1, "raw_score": 0.5}, {"id": 2, "raw_score": 0.9}]},
        {"kind": "use", "used_ids": [1]},
        {"kind": "search", "hits": [{"id": 1, "raw_score": 0.7}]},
    ]
    assert best_scores(ledger) == {1: 0.7, 2: 0.9}


def test_due_lists_what_falls_below_the_gate_within_the_horizon_soonest_first(
    tmp_path: Path,
) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    book = ReviewBook(tmp_path / "reviews.json", initial_stability_days=3.0)
    memories = [
        (1, "weak and old", now - timedelta(days=10)),  # 0.5 × R: below 0.45 already
        (2, "strong and new", now - timedelta(hours=1)),  # 1.0 × R: years away
        (3, "weak and new", now - timedelta(hours=1)),  # 0.5 × R: crosses within a week
    ]
    references = {1: 0.5, 3: 0.5}
    soon = due_memories(
        memories, book, references=references, threshold=0.45, now=now,
        horizon=timedelta(days=1),
    )  # fmt: skip
    assert [d.id for d in soon] == [1]
    assert soon[0].days_left == 0.0 and soon[0].retrievability < 0.9
    week = due_memories(
        memories, book, references=references, threshold=0.45, now=now,
        horizon=timedelta(days=7),
    )  # fmt: skip
    assert [d.id for d in week] == [1, 3]
    assert 1.0 < week[1].days_left <= 7.0


def test_a_used_memory_is_due_later(tmp_path: Path) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    written = now - timedelta(days=2)
    book = ReviewBook(tmp_path / "reviews.json", initial_stability_days=3.0)
    memories = [(7, "the user's dog is called Rex", written)]

    def left() -> float:
        (due,) = due_memories(
            memories, book, references={7: 0.5}, threshold=0.45, now=now,
            horizon=timedelta(days=365),
        )  # fmt: skip
        return due.days_left

    before = left()
    book.review(7, written, now, used=True)
    assert left() > before
