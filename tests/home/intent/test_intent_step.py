"""The intent step: its scores on the held-out halves, the near-misses it must leave to
conversation, its examples files refused by name, hostile text, and ``home intent judge``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from home.intent.errors import IntentError
from home.intent.step import (
    EXAMPLES_FILE,
    MAX_WORDS,
    TRAINING_FILE,
    IntentStep,
    Verb,
    cues,
    frame,
    load_intent_step,
    merged,
    read_examples,
    read_training,
    spoken_form,
)
from tests.support.intent_set import HELD_OUT, TUNED_ON, read_half, score_step, unseen


@pytest.fixture(scope="module")
def step() -> Iterator[IntentStep]:
    """The shipped step: JMFTS's MiniLM graph, the shipped examples and training."""
    yield load_intent_step()


# -- acceptance --------------------------------------------------------------------------

# Floors per held-out half: (macro precision, worst verb's recall). The goal is 0.90 and
# 0.85 on every set. Measured when these lines were written (2026-12-06, JMFTS's int8
# graph, trained on the examples and the written, public, fourth and fifth tuning halves):
# written .944 / .83 (remember), second .935 / .88, third .919 / .85, public .946 / .96,
# fourth .954 / .86, fifth .958 / .90. Each floor is that less about one utterance of its
# smallest verb, so a step that decides worse fails; the fifth set (written blind to the
# step, its held-out half scored .948 / .90 before the step learnt from its tuning half)
# holds the goal itself. Utterances the step also trains on are left out (:func:`unseen`).
FLOORS = {
    "written": (0.92, 0.78),
    "second": (0.91, 0.82),
    "third": (0.89, 0.80),
    "public": (0.92, 0.93),
    "fourth": (0.92, 0.82),
    "fifth": (0.90, 0.85),
}


@pytest.mark.parametrize("name", list(HELD_OUT))
def test_the_step_on_each_held_out_half(step: IntentStep, name: str) -> None:
    score = score_step(step, unseen(step, read_half(HELD_OUT[name], "held_out")))
    per_verb = "  ".join(f"{v.verb.value} {v.precision:.2f}/{v.recall:.2f}" for v in score.verbs)
    print(f"{name}: accuracy {score.accuracy:.3f}, macro precision {score.macro('precision'):.3f}")
    print(per_verb)
    precision_floor, recall_floor = FLOORS[name]
    worst = min((v for v in score.verbs if v.verb is not Verb.CHAT), key=lambda v: v.recall)
    wrong = "\n".join(f"  {lab.value} -> {d.value}: {t}" for t, lab, d in score.wrong)
    assert score.macro("precision") >= precision_floor, f"{name}: {per_verb}\n{wrong}"
    assert worst.recall >= recall_floor, f"{name}: {worst.verb.value} {per_verb}\n{wrong}"


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("i forgot my keys", Verb.CHAT),
        ("remind me what my sister's name is", Verb.CHAT),
        ("my mum reminded me about the party", Verb.CHAT),
        ("the operator at the bank was really rude", Verb.CHAT),
        ("what's my locker code", Verb.CHAT),
        ("remind me in ten minutes to take the bread out", Verb.REMIND),
        ("note that the boiler was serviced today", Verb.NOTE),
        ("forget that", Verb.FORGET),
        ("remember that my locker code is four five one two", Verb.REMEMBER),
        ("ask the operator what i said about my car", Verb.ASK_OPERATOR),
        ("cancel the bread timer", Verb.CANCEL_REMINDER),
        ("what reminders do i have", Verb.LIST_REMINDERS),
        ("no my sister is called anna not anne", Verb.CORRECT),
    ],
)
def test_the_issues_own_examples_and_near_misses(step: IntentStep, text: str, verb: Verb) -> None:
    (decision,) = step.decide([text])
    assert decision.verb is verb, decision.to_dict()
    assert abs(sum(decision.scores.values()) - 1) < 0.01
    assert decision.margin >= 0


def test_held_out_halves_are_apart_from_training(step: IntentStep) -> None:
    """The step learns from its own examples and the tuning halves. Sets written apart
    share a few short commands word for word; scores leave those out (:func:`unseen`),
    and they stay a few."""
    for name, path in HELD_OUT.items():
        held = read_half(path, "held_out")
        kept = unseen(step, held)
        total, left = sum(map(len, held.values())), sum(map(len, kept.values()))
        print(f"{name}: {total - left} of {total} held-out utterances also trained on")
        assert left >= 0.95 * total


def test_the_training_file_is_the_tuning_halves() -> None:
    """intent_training.yaml is a copy of the tuning halves: the sets stay the source."""
    shipped = read_training()
    tuned = merged(*(read_half(path, "tuning") for path in TUNED_ON))

    def spoken(texts: dict[Verb, tuple[str, ...]]) -> dict[Verb, list[str]]:
        return {v: sorted(spoken_form(t) for t in ts) for v, ts in texts.items()}

    assert spoken(shipped) == spoken(tuned)


# -- the examples files, refused by name -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("chat: [unclosed", "examples.yaml:1: invalid YAML"),
        ("- a list\n", "expected a mapping"),
        ("chat: [hello]\nsing: [la la]\n", "'sing': not a verb"),
        ("chat: hello\n", "chat: expected a list"),
        ("chat: [hello, 3]\n", "chat[1]: expected an utterance"),
        ("chat: [hello, '  ']\n", "chat[1]: expected an utterance"),
        ("chat: [hello]\n", "'note': expected at least one utterance"),
    ],
)
def test_a_bad_examples_file_is_refused_naming_file_and_key(
    tmp_path: Path, text: str, named: str
) -> None:
    path = tmp_path / "examples.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(IntentError) as err:
        read_examples(path)
    assert str(path) in str(err.value) and named in str(err.value)


def test_a_bad_training_file_names_its_section(tmp_path: Path) -> None:
    path = tmp_path / "training.yaml"
    path.write_text("first:\n  chat: [hi]\nsecond:\n  chat: [hi, {x: 1}]\n", encoding="utf-8")
    with pytest.raises(IntentError, match=r"second: chat\[1\]: expected an utterance"):
        read_training(path)
    with pytest.raises(IntentError, match="cannot read"):
        read_training(tmp_path / "absent.yaml")


def test_the_shipped_files_load_and_cover_every_verb() -> None:
    examples, training = read_examples(EXAMPLES_FILE), read_training(TRAINING_FILE)
    assert set(examples) == set(Verb) and set(training) == set(Verb)


# -- hostile text ------------------------------------------------------------------------

_HOSTILE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=4000
) | st.builds(
    lambda word, n: " ".join([word] * n),
    st.sampled_from(["remind", "forget", "me", "the operator", "not", "um", "'", "timer"]),
    st.integers(0, 3000),
)


@settings(max_examples=300, deadline=None)
@given(text=_HOSTILE)
def test_the_words_of_any_text_are_read_bounded(text: str) -> None:
    spoken = spoken_form(text)
    assert len(spoken.split()) <= MAX_WORDS
    assert set(cues(text)) <= set(Verb)
    assert len(frame(text).split()) <= 3 or frame(text) == spoken


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(_HOSTILE, min_size=1, max_size=4))
def test_any_text_gets_a_verb_and_the_next_turn_is_still_judged(
    step: IntentStep, texts: list[str]
) -> None:
    decisions = step.decide(texts)
    assert len(decisions) == len(texts) and all(d.verb in Verb for d in decisions)
    (after,) = step.decide(["remind me in ten minutes to take the bread out"])
    assert after.verb is Verb.REMIND


# -- the command -------------------------------------------------------------------------


def _judge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "home.cli", "intent", "judge", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_judge_says_each_utterances_verb_as_json_and_as_a_table() -> None:
    done = _judge("set a timer for twenty minutes", "i forgot my keys", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["decisions"]
    assert [(r["utterance"], r["verb"]) for r in rows] == [
        ("set a timer for twenty minutes", "remind"),
        ("i forgot my keys", "chat"),
    ]
    assert rows[0]["cues"] == ["remind"] and 0 < rows[0]["score"] <= 1
    assert rows[0]["call"] == {"by": "reminders"}
    assert rows[1]["call"] is None
    table = _judge("forget that")
    assert table.returncode == 0 and "forget" in table.stdout, table.stdout


def test_judge_shows_the_call_a_verb_would_be_carried_out_with() -> None:
    done = _judge(
        "note that the gutter is blocked", "put it in my diary the gutter is blocked",
        "remind me to buy stamps", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    framed, unframed, reminder = (r["call"] for r in json.loads(done.stdout)["decisions"])
    assert framed == {"by": "frame", "arguments": {"text": "the gutter is blocked"}}
    assert unframed == {"by": "model"}
    assert reminder == {"by": "reminders"}


def test_judge_help_teaches_and_no_utterance_is_an_error() -> None:
    helped = _judge("--help")
    assert helped.returncode == 0 and "remind me in ten minutes" in helped.stdout
    assert _judge().returncode != 0
