"""The reflex's pure parts: FSRS decay, the gate and its rendering, the evaluator's
reading and deduplication, configuration errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from home.memory.config import parse_config
from home.memory.errors import LedgerError, MemoryConfigError
from home.memory.evaluator import decide, parse_facts
from home.memory.fsrs import ReviewBook, retrievability, stability_after_success
from home.memory.memories import StoredMemory
from home.memory.recall import RANK_FLOOR, gate, rank_weight, render_recall, threaded, used_by_reply
from home.memory.records import Ledger

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def memory(
    i: int, score: float, days_old: float = 0.0, text: str = "", age: str = ""
) -> StoredMemory:
    return StoredMemory(
        id=i, content=text or f"memory {i}", written_at=NOW - timedelta(days=days_old),
        score=score, age=age,
    )  # fmt: skip


# -- FSRS -------------------------------------------------------------------------------


def test_retrievability_is_one_when_fresh_and_nine_tenths_at_the_stability() -> None:
    assert retrievability(0.0, 3.0) == 1.0
    assert retrievability(3.0, 3.0) == pytest.approx(0.9)
    assert retrievability(30.0, 3.0) == pytest.approx((1 + 19 / 81 * 10) ** -0.5)


@given(st.floats(0, 1e6), st.floats(0, 1e6), st.floats(0.01, 1e4))
def test_retrievability_sinks_with_time_but_never_vanishes(t1: float, t2: float, s: float) -> None:
    early, late = sorted((t1, t2))
    assert 0.0 < retrievability(late, s) <= retrievability(early, s) <= 1.0


def test_a_review_grows_stability_more_the_more_overdue() -> None:
    assert stability_after_success(3.0, 0.99) > 3.0
    assert stability_after_success(3.0, 0.5) > stability_after_success(3.0, 0.9)


def test_the_review_book_persists_and_reviews_reset_the_clock(tmp_path: Path) -> None:
    path = tmp_path / "reviews.json"
    book = ReviewBook(path, 3.0)
    written = NOW - timedelta(days=30)
    unreviewed = book.retrievability(7, written, NOW)
    state = book.review(7, written, NOW)
    assert state.stability_days > 3.0 and state.reviews == 1
    reread = ReviewBook(path, 3.0)
    assert reread.retrievability(7, written, NOW) == 1.0 > unreviewed
    assert reread.retrievability(7, written, NOW + timedelta(days=3)) > retrievability(3.0, 3.0)
    path.write_text("{not json")
    with pytest.raises(LedgerError, match=r"reviews\.json"):
        ReviewBook(path, 3.0)
    path.write_text('{"7": {"stability_days": 2.0}}')
    with pytest.raises(LedgerError, match=r"reviews\.json"):
        ReviewBook(path, 3.0)


def test_a_review_book_from_before_reads_and_its_lapses_are_left(tmp_path: Path) -> None:
    path = tmp_path / "reviews.json"
    path.write_text(
        '{"7": {"stability_days": 1.5, "last_review": "2026-11-29T12:00:00+00:00",'
        ' "reviews": 2, "lapses": 3}}'
    )
    state = ReviewBook(path, 3.0).state(7, NOW)
    assert (state.stability_days, state.reviews) == (1.5, 2)


# -- the gate ---------------------------------------------------------------------------


def test_the_gate_passes_at_or_above_the_threshold_and_keeps_every_score() -> None:
    hits = [("r", memory(1, 0.45)), ("r", memory(2, 0.449)), ("r", memory(3, 0.8))]
    scored = gate(hits, 0.45, lambda root, m: 1.0, shown=5)
    assert [(h.memory.id, h.passed) for h in scored] == [(3, True), (1, True), (2, False)]


def test_decay_ranks_but_never_hides_and_one_document_is_scored_once() -> None:
    hits = [("decaying", memory(1, 0.6)), ("plain", memory(1, 0.5)), ("decaying", memory(2, 0.6))]
    r = {1: 0.01, 2: 0.9}
    scored = gate(hits, 0.45, lambda root, m: r[m.id] if root == "decaying" else 1.0, shown=5)
    # Memory 1, a hundredth retrievable, still passes: its cosine is above the threshold.
    assert [(h.memory.id, h.root, round(h.score, 3), h.passed) for h in scored] == [
        (2, "decaying", round(0.6 * rank_weight(0.9), 3), True),
        (1, "plain", 0.5, True),
    ]
    assert rank_weight(0.0) == RANK_FLOOR and rank_weight(1.0) == 1.0


def test_the_first_shown_by_rank_pass_and_a_newer_memory_outranks_an_old_equal() -> None:
    hits = [("r", memory(i, 0.6)) for i in range(1, 5)]
    r = {1: 0.2, 2: 1.0, 3: 0.6, 4: 0.9}
    scored = gate(hits, 0.45, lambda root, m: r[m.id], shown=2)
    assert [(h.memory.id, h.passed) for h in scored] == [
        (2, True), (4, True), (3, False), (1, False)
    ]  # fmt: skip


RAMIPRIL = "The user is on ramipril for the user's blood pressure."
AMLODIPINE = "The gp's taken the user off ramipril and put the user on amlodipine instead."


def test_a_revision_under_the_gate_is_shown_above_what_it_revises_which_stays_shown() -> None:
    hits = [
        ("r", memory(1, 0.38, days_old=60, text=RAMIPRIL)),
        ("r", memory(2, 0.34, days_old=30, text="The user is allergic to penicillin.")),
        ("r", memory(3, 0.27, days_old=10, text=AMLODIPINE)),
    ]
    scored = gate(hits, 0.3, lambda root, m: 1.0, shown=5)
    assert [(h.memory.id, h.passed) for h in scored] == [(3, True), (1, True), (2, True)]
    assert scored[0].score > scored[1].score and scored[0].raw_score == 0.27


def test_an_older_memory_is_never_read_as_the_revision_of_a_newer_one() -> None:
    hits = [
        ("r", memory(1, 0.38, days_old=10, text=RAMIPRIL)),
        ("r", memory(3, 0.27, days_old=60, text=AMLODIPINE)),
    ]
    scored = gate(hits, 0.3, lambda root, m: 1.0, shown=5)
    assert [(h.memory.id, h.passed) for h in scored] == [(1, True), (3, False)]


def test_a_later_fact_sharing_only_who_it_is_about_moves_nothing() -> None:
    # "priya" is in every candidate: it names who, not what changed.
    texts = [
        "The user said: priya does yoga on monday evenings.",
        "The user said: priya's brother is arjun.",
        "The user said: priya works at the royal infirmary.",
        "The user said: Priya finished her retraining, she's a midwife now.",
    ]
    hits = [("r", memory(i, 0.6 - i / 10, days_old=30 - i, text=t)) for i, t in enumerate(texts)]
    scored = gate(hits, 0.3, lambda root, m: 1.0, shown=5)
    assert [h.memory.id for h in scored] == [0, 1, 2, 3]


def test_of_two_revisions_the_latest_comes_first_and_nothing_is_hidden() -> None:
    hits = [
        (
            "r",
            memory(1, 0.7, days_old=90, text="The user said: the wifi password is bluefalcon72."),
        ),
        ("r", memory(2, 0.5, days_old=40, text="We changed the wifi password to otter9.")),
        ("r", memory(3, 0.4, days_old=5, text="The wifi password changed again, it's heron4.")),
    ]
    scored = gate(hits, 0.3, lambda root, m: 1.0, shown=5)
    assert [(h.memory.id, h.passed) for h in scored] == [(3, True), (2, True), (1, True)]


def test_shown_memories_run_oldest_first_each_with_its_age() -> None:
    hits = [
        ("r", memory(1, 0.9, 1, "The user moved to Porto.", "1 day ago")),
        ("r", memory(2, 0.5, 60, "The user lives in Lisbon.", "2 months ago")),
        ("r", memory(3, 0.1, 90, "Unrelated.", "3 months ago")),
    ]
    text = render_recall(threaded(gate(hits, 0.45, lambda root, m: 1.0, shown=5)))
    lines = text.splitlines()
    assert lines[1:] == [
        "- (2 months ago) The user lives in Lisbon.",
        "- (1 day ago) The user moved to Porto.",
    ]


@pytest.mark.parametrize(
    ("memory_text", "utterance", "reply", "used"),
    [
        (
            "The user's dog is called Biscuit.",
            "what is my dog called",
            "Your dog is Biscuit.",
            True,
        ),
        (
            "The user's dog is called Biscuit.",
            "what is my dog called",
            "I do not know your dog.",
            False,
        ),
        (
            "The user's dog is called Biscuit.",
            "is Biscuit hungry",
            "Biscuit is always hungry.",
            False,
        ),
    ],
)
def test_a_reply_used_a_memory_when_it_repeats_what_only_the_memory_brought(
    memory_text: str, utterance: str, reply: str, used: bool
) -> None:
    assert used_by_reply(memory_text, utterance, reply) is used


# -- the evaluator ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        ("NONE", []),
        ("none.", []),
        ("Nothing here worth keeping.", []),
        ("- A.\n- B.\n- a\n* C\n1. D\nprose", ["A.", "B.", "C", "D"]),
        ("Here you go:\n-   spaced   out  \n- NONE", ["spaced out"]),
    ],
)
def test_the_evaluators_answer_is_read_as_bullet_facts(answer: str, facts: list[str]) -> None:
    assert parse_facts(answer) == facts


def test_a_restatement_reinforces_a_near_one_with_new_words_supersedes_far_is_created() -> None:
    stored = memory(5, 0.97, text="The user's dog is called Biscuit.")
    assert decide("the user's dog is called biscuit", [stored], 0.9).action == "reinforce"
    # Near, and no word it does not already have: the same memory, said again.
    same = decide("The user's dog is Biscuit.", [stored], 0.9)
    assert same.action == "reinforce" and same.existing == stored
    near = decide("The user's dog is named Biscuit.", [stored], 0.9)
    assert near.action == "supersede" and near.existing == stored and near.nearest_score == 0.97
    assert decide("The user likes tea.", [memory(6, 0.3)], 0.9).action == "create"
    assert decide("Anything.", [], 0.9).action == "create"


# -- configuration and ledger -----------------------------------------------------------

RUN = {
    "agent": "a1", "nats_url": "nats://x", "binding_file": "/tmp/run/binding.json",
    "jmfts_url": "http://x", "jmfts_token_file": "/tmp/t",
}  # fmt: skip


def test_defaults_work_and_state_lives_beside_the_binding_file() -> None:
    config = parse_config(dict(RUN))
    assert [r.path for r in config.roots] == ["workspace/a1"]
    assert config.memory_root == "workspace/a1"
    assert config.ledger_path == Path("/tmp/run/memory_reflex/searches.jsonl")
    decaying = parse_config({**RUN, "roots": ["a", {"path": "b", "decay": True}]})
    assert [(r.path, r.decay) for r in decaying.roots] == [("a", False), ("b", True)]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"threshold": 1.5}, "'threshold'"),
        ({"threshold": "high"}, "'threshold'"),
        ({"k": 0}, "'k'"),
        ({"every_n": True}, "'every_n'"),
        ({"roots": []}, "'roots'"),
        ({"roots": [{"path": "x", "decay": "yes"}]}, "'roots[0].decay'"),
        ({"roots": [{"path": "x", "ttl": 3}]}, "'roots[0]'"),
        ({"thresold": 0.5}, "unknown key(s) ['thresold']"),
        ({"agent": "Not A Token"}, "'agent'"),
    ],
)
def test_a_bad_key_is_named(extra: dict[str, Any], named: str) -> None:
    with pytest.raises(MemoryConfigError) as bad:
        parse_config({**RUN, **extra})
    assert named in str(bad.value)


def test_a_malformed_ledger_line_is_named_by_number(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "searches.jsonl")
    ledger.write({"kind": "search", "query": "x"})
    with ledger.path.open("a") as out:
        out.write("{broken\n")
    with pytest.raises(LedgerError, match=r"searches.jsonl:2: not JSON"):
        ledger.read()
