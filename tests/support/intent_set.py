"""The intent step's labelled sets and how a step is scored on them (test and bench).

``intent_set.yaml`` (written for the step before its code) and ``public_set.yaml``
(public human-written assistant requests; its header names the sources, licences and
mapping) each have a ``tuning`` half, which the step is trained on
(home/intent/intent_training.yaml is a copy), and a ``held_out`` half. ``intent_set_2.yaml``
and ``intent_set_3.yaml``, by other hands, are held out whole; ``intent_set_4.yaml`` and
``intent_set_5.yaml``, by other hands again, are halved like the first. Held-out halves are read
only to be scored.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from home.intent.step import IntentStep, Verb, spoken_form

WRITTEN_SET = Path(__file__).parents[1] / "home" / "intent" / "intent_set.yaml"
PUBLIC_SET = WRITTEN_SET.with_name("public_set.yaml")
SECOND_SET = WRITTEN_SET.with_name("intent_set_2.yaml")
THIRD_SET = WRITTEN_SET.with_name("intent_set_3.yaml")
FOURTH_SET = WRITTEN_SET.with_name("intent_set_4.yaml")
FIFTH_SET = WRITTEN_SET.with_name("intent_set_5.yaml")
#: The sets whose tuning halves the step is trained on (home/intent/intent_training.yaml).
TUNED_ON = (WRITTEN_SET, PUBLIC_SET, FOURTH_SET, FIFTH_SET)
#: Every held-out half, by name.
HELD_OUT = {
    "written": WRITTEN_SET,
    "second": SECOND_SET,
    "third": THIRD_SET,
    "public": PUBLIC_SET,
    "fourth": FOURTH_SET,
    "fifth": FIFTH_SET,
}


def read_half(path: Path, half: str) -> dict[Verb, tuple[str, ...]]:
    """One half of a set: its utterances per verb."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))[half]
    return {Verb(label): tuple(items) for label, items in raw.items()}


def unseen(step: IntentStep, labelled: dict[Verb, tuple[str, ...]]) -> dict[Verb, tuple[str, ...]]:
    """``labelled`` without the utterances ``step`` was trained on. Sets written apart
    share a few short commands word for word ("forget that", "stop the timer"); a held-out
    score counts only what the step has not seen."""
    trained = {spoken_form(t) for texts in step.examples.values() for t in texts}
    return {
        verb: tuple(t for t in texts if spoken_form(t) not in trained)
        for verb, texts in labelled.items()
    }


@dataclass(frozen=True)
class VerbScore:
    """Precision and recall of one verb on one half."""

    verb: Verb
    support: int
    precision: float
    recall: float


@dataclass(frozen=True)
class StepScore:
    """How a step did on one half: per verb, and the wrong calls for failure messages."""

    verbs: tuple[VerbScore, ...]
    wrong: tuple[tuple[str, Verb, Verb], ...]  # (utterance, label, decided)
    ms_per_utterance: float

    @property
    def accuracy(self) -> float:
        """Share of utterances given their label."""
        total = sum(v.support for v in self.verbs)
        return 1 - len(self.wrong) / total

    def macro(self, attribute: str) -> float:
        """Mean ``precision`` or ``recall`` over the verbs (chat left out)."""
        values: list[float] = [getattr(v, attribute) for v in self.verbs if v.verb is not Verb.CHAT]
        return sum(values) / len(values)

    def of(self, verb: Verb) -> VerbScore:
        """The score of one verb."""
        return next(v for v in self.verbs if v.verb is verb)


def score_step(step: IntentStep, labelled: dict[Verb, tuple[str, ...]]) -> StepScore:
    """Decide every utterance one at a time (as a turn does) and count per verb."""
    pairs = [(text, label) for label, texts in labelled.items() for text in texts]
    decided: list[Verb] = []
    started = time.perf_counter()
    for text, _ in pairs:
        (decision,) = step.decide([text])
        decided.append(decision.verb)
    elapsed_ms = (time.perf_counter() - started) * 1000
    wrong = tuple((t, lab, d) for (t, lab), d in zip(pairs, decided, strict=True) if d is not lab)
    said = Counter(d for d in decided)
    right = Counter(lab for (_, lab), d in zip(pairs, decided, strict=True) if d is lab)
    verbs = tuple(
        VerbScore(
            verb,
            len(labelled[verb]),
            right[verb] / said[verb] if said[verb] else 0.0,
            right[verb] / len(labelled[verb]),
        )
        for verb in labelled
    )
    return StepScore(verbs, wrong, elapsed_ms / len(pairs))
