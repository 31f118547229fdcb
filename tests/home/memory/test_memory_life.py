"""A 30-day slice of the household's life (``make bench NAME=memory_life``) as a test.

The tuning half's facts said in the first 30 days, their restatements and corrections
in those days, and five times as many turns of chatter go through the reflex's path on
a real JMFTS with the real keep gate, the clock injected. Asked in other words 1, 7 and
30 days after each was said, the shipped recall shows the current answer for at least
75 % of the questions at 30 days (it measured 0.81 on 31 facts), and every fact can
still be brought back by one of its questions at every age. Recall as it was before
(decay gating the cosine at 0.45, a shown and unused memory a lapse) fails both on the
same life, which is what this test guards.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.bench.memory_life import HALVES, Fact, fraction, read_chatter, read_half, run_life

pytestmark = pytest.mark.slow
AGES = (1, 7, 30)
FLOOR = 0.75


def month(facts: list[Fact]) -> list[Fact]:
    """The facts said in the first 30 days, with what was said of them in those days."""
    sliced = []
    for fact in facts:
        if fact.stated.day > 30:
            continue
        fix = fact.correction if fact.correction and fact.correction.day <= 30 else None
        again = tuple(r for r in fact.restatements if r.day <= 30)
        sliced.append(replace(fact, correction=fix, restatements=again))
    return sliced


async def test_a_month_of_life_keeps_every_fact_recallable(tmp_path: Path) -> None:
    facts = month(read_half(HALVES["tuning"]))
    assert len(facts) >= 30
    tallies = await run_life(facts, read_chatter(), ("on", "peer"), tmp_path, ages=AGES)
    shipped, before = tallies["on"], tallies["peer"]
    recall_at_5, asked = fraction(shipped, "recall@5", ("tuning", 30))
    assert asked == shipped.asked[("tuning", 30)] >= len(facts)
    assert recall_at_5 >= FLOOR, recall_at_5
    for age in AGES:
        assert fraction(shipped, "unrecallable", ("tuning", age))[0] == 0.0, age
    # The same life with recall as it was: month-old facts have faded out of reach.
    assert fraction(before, "recall@5", ("tuning", 30))[0] < FLOOR
    assert fraction(before, "unrecallable", ("tuning", 30))[0] > 0.0
