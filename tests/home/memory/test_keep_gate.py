"""The keep gate: its acceptance on the labelled set, its pure parts, and ``home memory judge``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

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
from tests.support.keep_gate_set import read_labelled_set, score_gate


@pytest.fixture(scope="module")
def gate() -> Iterator[KeepGate]:
    """The shipped gate: JMFTS's MiniLM graph and the packaged examples."""
    yield load_keep_gate()


# -- acceptance --------------------------------------------------------------------------


def test_the_gate_keeps_facts_and_skips_the_rest_on_the_labelled_set(gate: KeepGate) -> None:
    labelled = read_labelled_set()
    score = score_gate(gate, labelled)
    print(
        f"keep precision {score.precision:.3f}, recall {score.recall:.3f}, "
        f"{score.ms_per_utterance:.2f} ms per utterance"
    )
    assert score.precision >= 0.9, f"wrongly kept: {score.wrongly_kept}"
    assert score.recall >= 0.8, f"missed: {score.missed}"


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
        ("keep: [a, b\n", "not YAML"),
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
