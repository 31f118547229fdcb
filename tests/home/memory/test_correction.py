"""What makes a new memory a correction of a stored one: the fact's slot. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from home.memory.correction import Slot, corrects, read_slot
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
