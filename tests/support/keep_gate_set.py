"""The keep gate's labelled acceptance set and how a gate is scored on it (test and bench)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from home.memory.keep_gate import KeepGate

LABELLED_SET = Path(__file__).parents[1] / "home" / "memory" / "keep_gate_set.yaml"
# The second set, in the recogniser's wording, written after the gate's tuning.
ASR_SET = LABELLED_SET.with_name("keep_gate_asr_set.yaml")


@dataclass(frozen=True)
class LabelledSet:
    """Utterances a person would want kept, and ones they would not."""

    keep: tuple[str, ...]
    skip: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.keep) + len(self.skip)

    def half(self, held_out: bool) -> LabelledSet:
        """Every second utterance of each side: the 2nd, 4th, ... when ``held_out``."""
        start = 1 if held_out else 0
        return LabelledSet(keep=self.keep[start::2], skip=self.skip[start::2])


def read_labelled_set(path: Path = LABELLED_SET) -> LabelledSet:
    """The ``keep:``/``skip:`` lists of the set file."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return LabelledSet(keep=tuple(raw["keep"]), skip=tuple(raw["skip"]))


@dataclass(frozen=True)
class GateScore:
    """How a gate did on a labelled set: the wrong calls are kept for the failure message."""

    true_keeps: int
    false_keeps: int
    missed: tuple[str, ...]
    wrongly_kept: tuple[str, ...]
    ms_per_utterance: float

    @property
    def precision(self) -> float:
        """Of what the gate kept, the fraction that should be kept."""
        kept = self.true_keeps + self.false_keeps
        return self.true_keeps / kept if kept else 0.0

    @property
    def recall(self) -> float:
        """Of what should be kept, the fraction the gate kept."""
        return self.true_keeps / (self.true_keeps + len(self.missed))


def score_gate(gate: KeepGate, labelled: LabelledSet, *, cues: bool = True) -> GateScore:
    """Judge every utterance of the set one at a time (as the reflex does) and count.

    ``cues=False`` judges on the embeddings alone (:func:`home.memory.keep_gate.judge`).
    """
    texts = [*labelled.keep, *labelled.skip]
    kept: list[bool] = []
    started = time.perf_counter()
    for text in texts:
        (verdict,) = gate.judge([text], cues=cues)
        kept.append(verdict.keep)
    elapsed_ms = (time.perf_counter() - started) * 1000
    should = [True] * len(labelled.keep) + [False] * len(labelled.skip)
    pairs = list(zip(texts, should, kept, strict=True))
    return GateScore(
        true_keeps=sum(s and k for _, s, k in pairs),
        false_keeps=sum(k and not s for _, s, k in pairs),
        missed=tuple(t for t, s, k in pairs if s and not k),
        wrongly_kept=tuple(t for t, s, k in pairs if k and not s),
        ms_per_utterance=elapsed_ms / len(texts),
    )
