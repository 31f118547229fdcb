"""What makes a new memory a correction of a stored one: the fact's slot. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from home.memory.correction import (
    Slot,
    change_said,
    corrects,
    read_slot,
    revises_recalled,
    revision_overlap,
)
from home.memory.evaluator import decide
from home.memory.memories import StoredMemory


def test_a_fact_reads_as_subject_relation_and_value() -> None:
    assert read_slot("The user's dog is called Rex now.") == Slot("dog", "is called", "rex")
    assert read_slot("The user's sister Ana lives in Porto.") == Slot(
        "sister ana", "lives in", "porto"
    )
    assert read_slot("The user's favourite colour is green.") == Slot(
        "favourite colour", "is", "green"
    )
    assert read_slot("The user's dog is now called Rex.") == Slot("dog", "is called", "rex")


@pytest.mark.parametrize(
    "fact",
    [
        "The user said hello.",
        "The user's dog.",
        "The user's is called Rex.",
        "Rex.",
        "The user is vegetarian.",  # a bare copula: what the user is, many things at once
        "The user is a night owl.",
        "The user likes jazz.",  # many values at once
        "The user's son plays the violin.",
    ],
)
def test_what_reads_as_no_slot_is_none(fact: str) -> None:
    assert read_slot(fact) is None


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("The user's dog is called Rex now.", "The user's dog is called Biscuit."),
        ("The user's sister lives in Lisbon now.", "The user's sister lives in Porto."),
        ("The user's car is a blue Volvo.", "The user's car is a red Fiat."),
        ("The user's birthday is in June.", "The user's birthday is in May."),
    ],
)
def test_a_new_value_for_the_same_slot_corrects(new: str, old: str) -> None:
    assert corrects(new, old)


@pytest.mark.parametrize(
    ("new", "old"),
    [
        # another subject, though MiniLM scores this pair 0.84
        ("The user's cat is called Biscuit.", "The user's dog is called Biscuit."),
        # the same subject, another relation
        ("The user's sister Ana lives in Porto.", "The user's sister is called Ana."),
        ("The user's dog is five years old.", "The user's dog is called Biscuit."),
        ("The user's dog likes carrots.", "The user's dog is called Biscuit."),
        ("The user is allergic to nuts.", "The user is vegetarian."),
        ("The user likes pizza.", "The user likes jazz."),
        # the same value: a repeat, not a correction
        ("The user's dog is called Biscuit now.", "The user's dog is called Biscuit."),
    ],
)
def test_another_thing_or_the_same_value_corrects_nothing(new: str, old: str) -> None:
    assert not corrects(new, old)


def _memory(id_: int, content: str, score: float) -> StoredMemory:
    return StoredMemory(id=id_, content=content, written_at=datetime.now(UTC), score=score)


def test_decide_corrects_a_stored_memory_whatever_its_score() -> None:
    stored = [
        _memory(1, "The user's cat is called Biscuit.", 0.83),
        _memory(2, "The user's dog is called Biscuit.", 0.55),
    ]
    decision = decide("The user's dog is called Rex now.", stored, 0.9)
    assert decision.action == "correct" and decision.existing == stored[1]


def test_decide_prefers_reinforce_over_correct() -> None:
    stored = [_memory(2, "The user's dog is called Rex.", 0.99)]
    assert decide("The user's dog is called Rex.", stored, 0.9).action == "reinforce"


@pytest.mark.parametrize(
    ("new", "old"),
    [
        # the embedded model's own wordings of "my dog is called Rex now", "... green now"
        ("The user's dog is Rex.", "The user's dog is called Biscuit."),
        ("The user's favourite colour is indeed green.", "The user's favourite colour is blue."),
        ("The user's sister moved to Lisbon.", "The user's sister lives in Porto."),
        ("The user's sister has moved to Lisbon.", "The user's sister lives in Porto."),
        ("The user's coffee is with oat milk now.", "The user's coffee is black."),
        ("The user's birthday is June.", "The user's birthday is in May."),
        ("The user works as a nurse now.", "The user works as a teacher."),
        ("The user moved to York.", "The user lives in Leeds."),
    ],
)
def test_the_same_slot_in_other_words_corrects(new: str, old: str) -> None:
    assert corrects(new, old)


@pytest.mark.parametrize(
    ("new", "old"),
    [
        (
            "The user said: the swimming club moved the session to fridays.",
            "The user said: ben's swimming is on mondays.",
        ),
        (
            "The user said: the plumber retired, we use a man called dave now.",
            "The user said: our plumber is called gary.",
        ),
        (
            "The user said: it's the green bin on tuesdays, not the blue one.",
            "The user said: the blue bin goes out on tuesdays.",
        ),
    ],
)
def test_a_fact_that_says_what_changed_revises_the_memory_it_shares_a_subject_with(
    new: str, old: str
) -> None:
    assert revision_overlap(new, old, 0.6) > 0
    decision = decide(new, [_memory(4, old, 0.6)], 0.9)
    assert decision.action == "correct" and decision.existing is not None
    assert decision.existing.id == 4


@pytest.mark.parametrize(
    ("new", "old", "score"),
    [
        # No change said: a second fact about the same person.
        ("The user said: ben is nine.", "The user said: ben's swimming is on mondays.", 0.6),
        # A change, but about something else (no shared word).
        ("The user said: the car is blue now.", "The user said: ben is nine.", 0.6),
        # A change about the same person, too far to be about the same thing.
        (
            "The user said: priya changed jobs, she is a midwife.",
            "The user said: priya drives a red fiat.",
            0.35,
        ),
        # Only "now", about the same person, not near enough.
        ("The user said: maya is vegetarian now.", "The user said: maya is eleven.", 0.6),
        # Nothing new: a restatement, not a revision.
        (
            "The user said: ben's swimming is still on mondays now.",
            "The user said: ben's swimming is on mondays.",
            0.8,
        ),
    ],
)
def test_no_change_no_shared_subject_too_far_or_nothing_new_revises_nothing(
    new: str, old: str, score: float
) -> None:
    assert revision_overlap(new, old, score) == 0
    assert decide(new, [_memory(4, old, score)], 0.9).action == "create"


def test_a_change_is_said_outright_or_only_by_now_and_lookalikes_say_none() -> None:
    assert change_said("the bins go out on wednesdays from now on") == "strong"
    assert change_said("she doesn't work there any more") == "strong"
    assert change_said("it's thursdays, not tuesdays") == "strong"
    assert change_said("leo's a size thirteen in shoes now") == "weak"
    assert change_said("the newspaper comes at seven") is None
    assert change_said("knowing him he'll be late") is None


def test_a_revision_only_said_by_now_must_be_nearer() -> None:
    new, old = "The user said: ben is nine now.", "The user said: ben is eight."
    assert revision_overlap(new, old, 0.6) == 0
    assert revision_overlap(new, old, 0.75) == 1


def test_the_memory_revised_is_the_one_sharing_most_words_then_the_nearest() -> None:
    new = "The user said: scratch that, a lad called kofi walks biscuit now."
    stored = [
        _memory(1, "The user's dog is called biscuit.", 0.62),
        _memory(2, "The user said: dan walks biscuit at lunchtime.", 0.58),
    ]
    decision = decide(new, stored, 0.9)
    assert decision.action == "correct" and decision.existing == stored[1]


DAN = "The user said: dan walks biscuit at lunchtime on weekdays."
KOFI = "scratch the dog walker thing, we've let him go and a lad called kofi walks biscuit now"


def test_a_near_skipped_correction_of_a_recalled_memory_is_kept() -> None:
    # The keep gate scored it -0.018: a correction lost leaves "dan" walking the dog.
    assert revises_recalled(KOFI, -0.018, [DAN])


@pytest.mark.parametrize(
    ("utterance", "score", "recalled"),
    [
        (KOFI, -0.2, [DAN]),  # far under the gate's boundary
        (KOFI, -0.018, ["The user's gp is parkview medical centre."]),  # about nothing shown
        ("dan walks biscuit at lunchtime now", -0.018, [DAN]),  # no change said outright
        ("what's the time in new york right now", -0.4, ["The user's sister lives in york."]),
    ],
)
def test_chatter_and_unrelated_changes_are_not_rescued(
    utterance: str, score: float, recalled: list[str]
) -> None:
    assert not revises_recalled(utterance, score, recalled)
