"""Whether the embedded model's answers are right, and stay on the topic asked.

The set (``tests/home/llm/factual_prompts.yaml``) holds questions with the words a
right answer holds, and topic switches: a question, then another on a new topic in
the same conversation, whose answer is wrong when it holds the first topic's words.
A word matches at the start of a word of the answer, in any case ("spider" takes
"Spiders"). Every second item of each list is held out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

FACTUAL_SET = Path(__file__).parents[1] / "home" / "llm" / "factual_prompts.yaml"


@dataclass(frozen=True)
class Factual:
    """A question and the words (or word starts) one of which a right answer holds."""

    prompt: str
    expect: tuple[str, ...]


@dataclass(frozen=True)
class Switch:
    """A question, then one on a new topic; the second answer may hold none of ``off_topic``."""

    first: str
    then: str
    off_topic: tuple[str, ...]


@dataclass(frozen=True)
class FactualSet:
    """The questions and the switches of the set file, or of one half of it."""

    factual: tuple[Factual, ...]
    switches: tuple[Switch, ...]

    def half(self, held_out: bool) -> FactualSet:
        """Every second item of each list: the 2nd, 4th, ... when ``held_out``."""
        start = 1 if held_out else 0
        return FactualSet(self.factual[start::2], self.switches[start::2])


def read_factual_set(path: Path = FACTUAL_SET) -> FactualSet:
    """The ``factual:`` and ``switches:`` lists of the set file."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    factual = (Factual(str(f["prompt"]), tuple(map(str, f["expect"]))) for f in raw["factual"])
    switches = (
        Switch(str(s["first"]), str(s["then"]), tuple(map(str, s["off_topic"])))
        for s in raw["switches"]
    )
    return FactualSet(tuple(factual), tuple(switches))


def holds_any(answer: str | None, words: tuple[str, ...]) -> bool:
    """Whether ``answer`` holds one of ``words`` at the start of one of its words."""
    if not answer:
        return False
    return any(re.search(rf"(?<![\w]){re.escape(w)}", answer, re.IGNORECASE) for w in words)


def prompts_of(items: FactualSet) -> tuple[str, ...]:
    """What is said, in order: every question, then each switch's two questions."""
    switches = [said for s in items.switches for said in (s.first, s.then)]
    return (*(f.prompt for f in items.factual), *switches)


@dataclass(frozen=True)
class FactualScore:
    """How many questions were answered right and switches stayed on topic; the misses."""

    right: int
    wrong: tuple[str, ...]
    on_topic: int
    off_topic: tuple[str, ...]


def score(items: FactualSet, answers: list[str | None]) -> FactualScore:
    """Score the answers (in the order of :func:`prompts_of`) against the set."""
    factual, switched = answers[: len(items.factual)], answers[len(items.factual) :]
    wrong = tuple(
        f"{f.prompt!r} -> {a!r}" for f, a in zip(items.factual, factual, strict=True)
        if not holds_any(a, f.expect)
    )  # fmt: skip
    seconds = switched[1::2]
    off = tuple(
        f"{s.first!r} then {s.then!r} -> {a!r}"
        for s, a in zip(items.switches, seconds, strict=True)
        if a is None or holds_any(a, s.off_topic)
    )
    return FactualScore(len(factual) - len(wrong), wrong, len(seconds) - len(off), off)
