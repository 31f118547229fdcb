"""The keep gate: its acceptance on the labelled set, its pure parts, and ``home memory judge``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from home.memory import keep_gate, spoken
from home.memory.errors import KeepGateError
from home.memory.evaluator import normalized
from home.memory.keep_gate import (
    CUE_WEIGHT,
    NEIGHBOURS,
    Cue,
    KeepGate,
    Prototypes,
    judge,
    load_keep_gate,
    opening_cue,
    read_examples,
)
from tests.support.keep_gate_set import ASR_SET, read_labelled_set, score_gate


@pytest.fixture(scope="module")
def gate() -> Iterator[KeepGate]:
    """The shipped gate: JMFTS's MiniLM graph and the packaged examples."""
    yield load_keep_gate()


# -- acceptance --------------------------------------------------------------------------


def test_the_gate_keeps_facts_and_skips_the_rest_on_the_labelled_set(gate: KeepGate) -> None:
    """Measured: precision 1.000 (100 of 100 kept), recall 0.901 (11 of 111 missed).

    Asserted within one utterance each way (precision >= 100/101, recall >= 99/111):
    the gate before its last two tunings fails it (0.971 with 3 wrongly kept, then
    recall 0.883 with 13 missed), as a gate that kept less well would.
    """
    labelled = read_labelled_set()
    score = score_gate(gate, labelled)
    print(
        f"keep precision {score.precision:.3f}, recall {score.recall:.3f}, "
        f"{score.ms_per_utterance:.2f} ms per utterance"
    )
    assert len(labelled.keep) == 111 and len(labelled.skip) == 99, "the claim is on this set"
    assert score.false_keeps <= 1, f"wrongly kept: {score.wrongly_kept}"
    assert len(score.missed) <= 12, f"missed: {score.missed}"


# Measured on the half the assertions were written from (25 keep, 25 skip): with cues
# precision 1.000, recall 0.960; without, 0.923 (2 wrongly kept) and 0.960. Asserted
# within one utterance each way, on both halves (wrongly kept, missed at most).
ASR_BOUNDS = {True: (1, 2), False: (3, 2)}


@pytest.mark.parametrize("cues", [True, False], ids=["cues", "no cues"])
@pytest.mark.parametrize("held_out", [False, True], ids=["written from", "held out"])
def test_the_gate_on_a_set_in_the_recognisers_wording_written_after_its_tuning(
    gate: KeepGate, held_out: bool, cues: bool
) -> None:
    labelled = read_labelled_set(ASR_SET).half(held_out)
    score = score_gate(gate, labelled, cues=cues)
    print(f"keep precision {score.precision:.3f}, recall {score.recall:.3f}")
    wrongly_kept, missed = ASR_BOUNDS[cues]
    assert (len(labelled.keep), len(labelled.skip)) == (25, 25)
    assert score.false_keeps <= wrongly_kept, f"wrongly kept: {score.wrongly_kept}"
    assert len(score.missed) <= missed, f"missed: {score.missed}"


def test_the_asr_set_is_worded_as_the_recogniser_writes_and_new_to_the_gate() -> None:
    labelled = read_labelled_set(ASR_SET)
    assert (len(labelled.keep), len(labelled.skip)) == (50, 50)
    texts = (*labelled.keep, *labelled.skip)
    assert all(t == t.lower() and not re.search(r"[^a-z' ]", t) for t in texts)
    first, examples = read_labelled_set(), read_examples()
    seen = {normalized(t) for t in (*first.keep, *first.skip, *examples.keep, *examples.skip)}
    assert len({normalized(t) for t in texts} - seen) == len(texts)


def test_the_labelled_set_is_large_varied_and_apart_from_the_gates_own_examples() -> None:
    labelled = read_labelled_set()
    examples = read_examples()
    assert len(labelled) >= 200
    assert len(labelled.keep) >= 90 and len(labelled.skip) >= 90
    tested = [normalized(t) for t in (*labelled.keep, *labelled.skip)]
    assert len(set(tested)) == len(tested), "an utterance is in the set twice"
    shipped = {normalized(t) for t in (*examples.keep, *examples.skip)}
    assert not set(tested) & shipped, "the set repeats the gate's own examples"


def test_a_question_about_a_fact_is_skipped_and_the_fact_and_its_correction_kept(
    gate: KeepGate,
) -> None:
    said, correction, asked = gate.judge(
        ["my dog is called Biscuit", "my dog is called Rex now", "what is my dog called"]
    )
    assert said.keep and correction.keep
    assert not asked.keep and asked.cue is Cue.QUESTION


# -- the pure decision -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        ("what is the weather", Cue.QUESTION),
        ("Where's my phone", Cue.QUESTION),
        ("is it raining", Cue.QUESTION),
        ("my dog is called Rex?", Cue.QUESTION),
        ("turn the lights off", Cue.COMMAND),
        ("Play something", Cue.COMMAND),
        ("remember that my locker is 12", Cue.REMEMBER),
        ("note that I'm away in May", Cue.REMEMBER),
        ("when I was little we lived in Spain", Cue.NONE),
        ("what my wife wants is a garden", Cue.NONE),
        ("when did I say that", Cue.QUESTION),
        ("my dog is called Rex", Cue.NONE),
        ("I work nights", Cue.NONE),
        # As a recogniser writes it: fillers and openers ahead of the point.
        ("um so what's the weather like", Cue.QUESTION),
        ("okay uh turn the lights off", Cue.COMMAND),
        ("Remember this: my sister Ingrid lives in Trondheim.", Cue.REMEMBER),
        ("um okay remember that my locker is 12", Cue.REMEMBER),
        ("remember, my dog's name is Biscuit", Cue.REMEMBER),
        ("remember to call mum", Cue.COMMAND),
        ("don't forget the bins go out on wednesdays", Cue.REMEMBER),
        ("so um my sister lives in Oslo", Cue.NONE),
        ("", Cue.NONE),
    ],
)
def test_the_opening_cue_is_read_off_the_first_words(text: str, cue: Cue) -> None:
    assert opening_cue(text) is cue


@pytest.mark.parametrize(
    "text", ["don't forget your pe kit", "remember your keys", "remember you're driving"]
)
def test_a_reminder_said_to_someone_in_the_room_is_no_request_to_remember(text: str) -> None:
    assert opening_cue(text) is not Cue.REMEMBER


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


PROTOTYPES = Prototypes(
    keep=np.stack([unit(1, 0, 0), unit(1, 0.1, 0), unit(1, 0, 0.1)]),
    skip=np.stack([unit(0, 1, 0), unit(0, 1, 0.1), unit(0.1, 1, 0)]),
)


def test_judge_keeps_what_is_nearer_the_keep_examples_and_the_cue_moves_the_score() -> None:
    near_keep = unit(1, 0.2, 0)
    plain = judge(near_keep, "my flat is small", PROTOTYPES)
    asked = judge(near_keep, "how small is my flat", PROTOTYPES)
    assert plain.keep and plain.score > 0
    assert asked.score == pytest.approx(plain.score - CUE_WEIGHT, abs=1e-3)
    assert not judge(unit(0.2, 1, 0), "my flat is small", PROTOTYPES).keep


def test_with_cues_off_the_embeddings_decide_alone() -> None:
    near_keep = unit(1, 0.2, 0)
    asked = judge(near_keep, "how small is my flat", PROTOTYPES, cues=False)
    assert asked.cue is Cue.NONE
    assert asked.score == judge(near_keep, "my flat is small", PROTOTYPES).score


def test_a_utterance_on_the_boundary_is_pushed_by_its_cue() -> None:
    between = unit(1, 1, 0)
    assert judge(between, "remember that the flat is small", PROTOTYPES).keep
    assert not judge(between, "tell me about the flat", PROTOTYPES).keep


# Just enough example utterances for one side of an examples file.
ENOUGH = "[" + ", ".join(f"u{i}" for i in range(NEIGHBOURS)) + "]"


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("- just a list\n", "expected a mapping"),
        (f"keep: {ENOUGH}\n", "'skip'"),
        (f"keep: {ENOUGH}\nskip: [3, {ENOUGH[1:]}\n", "skip[0]"),
        (f"keep: [a, b]\nskip: {ENOUGH}\n", "'keep'"),
        ("keep: [a, b\n", "examples.yaml:2: invalid YAML"),
    ],
)
def test_a_bad_examples_file_is_an_error_naming_the_file_and_key(
    tmp_path: Path, content: str, named: str
) -> None:
    path = tmp_path / "examples.yaml"
    path.write_text(content)
    with pytest.raises(KeepGateError, match=r".*examples\.yaml.*") as caught:
        read_examples(path)
    assert named in str(caught.value)


def test_the_shipped_examples_read() -> None:
    examples = read_examples()
    assert len(examples.keep) >= 50 and len(examples.skip) >= 50


# -- the cue lists, frozen -----------------------------------------------------------------
# The lists as the gate was tuned and measured with them. The command openers hold the
# first word of 25 skip items of the first labelled set and the question openers of 30,
# so a word added or dropped moves the measured numbers: change this copy on purpose, and
# measure again on both labelled sets (the second one with its held-out half) when you do.
FROZEN_QUESTION_OPENERS = """
what what's whats who who's whom whose where where's when when's why how how's which
is isn't are aren't was wasn't were do does did don't doesn't didn't can can't could
will won't would should shall may might have has am
"""
FROZEN_COMMAND_OPENERS = """
set turn play stop tell read add call pause cancel repeat switch open close start skip
put give find show text send remind wake lower raise dim check translate count spell
go say shuffle next let's please be search look order book make remember
"""
FROZEN_REMEMBER_OPENERS = (
    "i want you to remember that", "i want you to remember", "i'd like you to remember that",
    "can you remember that", "could you remember that", "can you remember",
    "could you remember", "please remember that", "please remember", "please note that",
    "remember this", "remember that", "make a note that", "take a note that", "note that",
    "just so you know", "for the record", "don't forget that", "keep in mind that",
    "keep in mind", "fyi",
)  # fmt: skip


FROZEN_BARE_WH = "what who whom whose where when why how which"
FROZEN_CLAUSE_SUBJECTS = "i i'm i've we we're we've my our"
FROZEN_BARE_REMEMBER = r"(?:remember|don't\s+forget)[\s,:;]+(?!to\b|your?\b|you're\b)(?=\w)"


def test_the_cue_lists_are_the_ones_the_gate_was_measured_with() -> None:
    assert frozenset(FROZEN_QUESTION_OPENERS.split()) == keep_gate._QUESTION_OPENERS
    assert frozenset(FROZEN_COMMAND_OPENERS.split()) == keep_gate._COMMAND_OPENERS
    assert frozenset(FROZEN_BARE_WH.split()) == keep_gate._BARE_WH
    assert frozenset(FROZEN_CLAUSE_SUBJECTS.split()) == keep_gate._CLAUSE_SUBJECTS
    assert FROZEN_REMEMBER_OPENERS == spoken._REMEMBER_OPENERS
    assert FROZEN_BARE_REMEMBER == spoken._BARE_REMEMBER
