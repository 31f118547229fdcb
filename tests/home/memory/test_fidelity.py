"""What memory keeps is what was said: the draft, the fidelity check, the labelled set.

The labelled set (``fidelity_tune.yaml``, ``fidelity_held_out.yaml``) was written before
the draft and the check it judges; the held-out half is scored here only in aggregate.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from home.memory.extract import drafted, from_model
from home.memory.fidelity import FUNCTION_WORDS, check
from home.memory.restate import restate_draft
from tests.bench.memory_fidelity import HALVES, read_set, value_kept


@pytest.mark.parametrize(
    ("said", "draft"),
    [
        ("my dog is called Biscuit", "The user's dog is called Biscuit."),
        ("I love spicy food", "The user loves spicy food."),
        ("I'm vegetarian", "The user is vegetarian."),
        ("I don't drive", "The user doesn't drive."),
        ("I really enjoy jazz", "The user really enjoys jazz."),
        ("we moved to York", "The user's household moved to York."),
        ("remember that I hate olives", "The user hates olives."),
        ("just so you know, my mum is Rosa", "The user's mum is Rosa."),
        ("the party is on Friday", "The user said: the party is on Friday."),
        # As a recogniser writes it.
        (
            "Remember this: my sister Ingrid lives in Trondheim.",
            "The user's sister Ingrid lives in Trondheim.",
        ),
        ("um so i like green tea", "The user likes green tea."),
        ("okay uh my my car is you know on level three", "The user's car is on level three."),
        # A stutter goes; a number said twice is a value and stays.
        ("my locker is one one four", "The user's locker is one one four."),
        ("the gate code is 4 4 7 1", "The user said: the gate code is 4 4 7 1."),
        ("i went to school in leeds", "The user went to school in leeds."),
        ("me and my wife live in oslo", "The user and the user's wife live in oslo."),
        ("we have two cats", "The user's household has two cats."),
        ("actually the bins go out on tuesdays", "The user said: the bins go out on tuesdays."),
    ],
)
def test_the_draft_puts_the_utterance_in_the_third_person_in_its_own_words(
    said: str, draft: str
) -> None:
    assert restate_draft(said) == draft


def test_a_letter_that_only_looks_like_i_is_kept_as_said() -> None:
    # Found by the property below: "İ".lower() is two characters, no key of the swap.
    assert restate_draft("İ like tea") == "The user said: İ like tea."
    memory = drafted("İ like tea")
    assert memory is not None and memory.faithful


@pytest.mark.parametrize("said", ["remember that", "um okay", "", "  so uh  "])
def test_an_utterance_that_is_all_opening_has_no_draft(said: str) -> None:
    assert restate_draft(said) is None and drafted(said) is None


@pytest.mark.parametrize(
    ("memory", "said", "invented"),
    [
        # Measured: what SmolLM2-135M wrote when asked to restate these.
        (
            "The user's name: Theresa",
            "Remember this: my sister Ingrid lives in Trondheim.",
            ["name", "theresa"],
        ),
        ("The user's favorite drink.", "I like green tea.", ["favorite", "drink"]),
        ("The user's sister Ingrid lives in Trondheim.", "my sister ingrid lives in trondheim", []),
        # Wording may change; content may not.
        ("The user studies law.", "i'm studying law", []),
        ("The user's locker is number 43.", "my locker is forty three", ["number"]),
        ("The user's locker is 43.", "my locker is forty three", []),
        ("The user doesn't like tea.", "i like tea", ["not"]),
        ("The user doesn't like tea.", "i don't like tea", []),
        ("The user's appointment is on the 9th.", "my appointment is on the ninth", []),
    ],
)
def test_the_check_names_every_content_word_nobody_said(
    memory: str, said: str, invented: list[str]
) -> None:
    assert list(check(memory, [said]).invented) == invented


def test_what_recall_showed_counts_as_said() -> None:
    fact = "The user's sister Ingrid lives in Trondheim."
    assert not check(fact, ["she lives in trondheim"]).faithful
    assert check(fact, ["she lives in trondheim", "The user's sister is called Ingrid."]).faithful
    (model,) = from_model([fact], ["she lives in trondheim"], ["The user's sister is Ingrid."])
    assert model.faithful and model.path == "model"


# -- the property: no stored memory has a word from nowhere ------------------------------

# The words the draft may bring in itself: the frame and the verb forms of the person swap.
FRAME = {"the", "user", "user's", "household", "said", "is", "has", "was", "would", "will"}
FRAME |= {"doesn't", "s"}
_TOKEN = re.compile(r"[a-z0-9']+")


def said_or_framed(word: str, said: set[str]) -> bool:
    """An oracle apart from the check under test: the word, or it plus a third-person ending."""
    word = word.strip("'")
    return (
        word in said
        or word in FRAME
        or (word.endswith("s") and word[:-1] in said)
        or (word.endswith("es") and word[:-2] in said)
        or (word.endswith("ies") and f"{word[:-3]}y" in said)
    )


_OPENINGS = ["", "um ", "so ", "okay uh ", "remember this ", "note that ", "just so you know "]
_PERSONS = ["i ", "my ", "we ", "our ", "i'm ", "me and my ", "", "the "]
_WORDS = st.text(
    alphabet=st.characters(codec="utf-8", categories=("Ll", "Lu", "Nd")), min_size=1, max_size=9
)


@settings(max_examples=400, deadline=None)
@given(
    opening=st.sampled_from(_OPENINGS),
    person=st.sampled_from(_PERSONS),
    words=st.lists(
        st.one_of(_WORDS, st.sampled_from(["like", "have", "love", "go", "study", "um", "you"])),
        min_size=1,
        max_size=12,
    ),
    mark=st.sampled_from(["", ".", "?", "!", ","]),
)
# Found by this property in a full run: "İ".lower() is two characters, no key of the swap.
@example(opening="", person="", words=["İ", "like", "tea"], mark="")
def test_no_draft_holds_a_content_word_that_is_neither_said_nor_frame(
    opening: str, person: str, words: list[str], mark: str
) -> None:
    utterance = opening + person + " ".join(words) + mark
    memory = drafted(utterance)
    if memory is None:
        return
    said = set(_TOKEN.findall(utterance.lower()))
    strays = [w for w in _TOKEN.findall(memory.memory.lower()) if not said_or_framed(w, said)]
    assert strays == [], (utterance, memory.memory)
    assert memory.faithful, (utterance, memory.memory, memory.invented)


_INVENTED = st.sampled_from(["theresa", "porto", "qazwix", "nineteen", "vet", "tuesday"])


@settings(max_examples=300, deadline=None)
@given(
    said=st.lists(st.sampled_from(["my", "sister", "ingrid", "lives", "in", "oslo", "dog"]),
                  min_size=1, max_size=8),
    added=st.lists(_INVENTED, max_size=3),
    kept=st.lists(st.sampled_from(["sister", "ingrid", "lives", "oslo", "dog"]), max_size=4),
)  # fmt: skip
def test_a_models_fact_with_a_word_from_nowhere_is_refused(
    said: list[str], added: list[str], kept: list[str]
) -> None:
    utterance = " ".join(said)
    fact = "The user's " + " ".join([*kept, *added]) + "."
    (extracted,) = from_model([fact], [utterance])
    nowhere = [w for w in added if w not in said and w not in FUNCTION_WORDS]
    stray_kept = [w for w in kept if w not in said]
    assert extracted.faithful == (not nowhere and not stray_kept), (utterance, fact)


# -- the labelled set ----------------------------------------------------------------------


@pytest.mark.parametrize("half", sorted(HALVES))
def test_the_draft_path_invents_nothing_and_keeps_the_value_on_the_labelled_set(
    half: str,
) -> None:
    items = read_set(HALVES[half])
    assert len(items) >= 100
    drafts = [(item, drafted(item.utterance)) for item in items]
    written = [(item, d) for item, d in drafts if d is not None]
    invented = sum(not d.faithful for _, d in written)
    kept = sum(value_kept(d.memory, item.value) for item, d in written)
    # Aggregates only: the held-out half's items are not for reading while tuning.
    assert len(written) == len(items)
    assert invented <= 0.01 * len(written), f"{half}: {invented} of {len(written)} invented"
    assert kept >= 0.98 * len(written), f"{half}: value kept in {kept} of {len(written)}"
