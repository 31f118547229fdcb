"""The keep gate: whether an utterance holds something worth remembering, before any model.

The embedded evaluator (SmolLM2-135M) restates every utterance as a fact and cannot say
"nothing here", so the decision is made before it is asked, on the MiniLM embedding
JMFTS already computes: an utterance is kept when it sits nearer the *keep* examples
(statements about the user, their people, places, preferences, plans, corrections) than
the *skip* ones (questions, commands, greetings, small talk). The examples are text
shipped beside this module (:data:`EXAMPLES_FILE`), embedded when the gate loads; no
weights are stored.

Spoken questions often arrive without a question mark and sit close to the statements
they ask about ("what is my dog called" / "my dog is called Rex"), so a cue read off the
first words (after any "um", "so" or "okay") moves the score: a question or command
opening pushes towards skip, an explicit "remember that ..." towards keep.

:func:`judge` is the pure decision over vectors; :class:`KeepGate` is the thin shell that
reads the examples and embeds text.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from home.memory.errors import KeepGateError
from home.memory.spoken import read_opening
from shared.errors import SchemaError
from shared.yaml_source import load_yaml

if TYPE_CHECKING:
    from home.jmfts.embedder import Embedder

EXAMPLES_FILE = Path(__file__).with_name("keep_gate_examples.yaml")
# Both chosen by leave-one-out over the examples themselves (never on the acceptance
# set). Keep precision/recall with 3, 5, 7, 9 neighbours and no cue: .76/.80, .80/.85,
# .84/.88, .82/.85; with 7, a cue of 0.1, 0.2, 0.3 gives .94, .97, .97 at recall .88.
# Of the two best, 0.3 keeps a question about a stored fact ("what is my dog called",
# -0.11) clearer of the boundary.
#: Nearest examples averaged on each side: one stray example cannot decide alone.
NEIGHBOURS = 7
#: How far an opening cue moves the score (cosine units; the margins are about ±0.3).
CUE_WEIGHT = 0.3
#: A score at or above this keeps.
THRESHOLD = 0.0

Vectors = npt.NDArray[np.float32]

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_QUESTION_OPENER_TEXT = """
what what's whats who who's whom whose where where's when when's why how how's which
is isn't are aren't was wasn't were do does did don't doesn't didn't can can't could
will won't would should shall may might have has am
"""
_QUESTION_OPENERS = frozenset(_QUESTION_OPENER_TEXT.split())
# A bare wh-word straight before the user's own "I"/"we"/"my" opens a clause, not a
# question: "when I was little we lived in Spain" (a question inverts: "when did I ...";
# "where's my phone" carries its verb).
_BARE_WH_TEXT = "what who whom whose where when why how which"
_BARE_WH = frozenset(_BARE_WH_TEXT.split())
_CLAUSE_SUBJECT_TEXT = "i i'm i've we we're we've my our"
_CLAUSE_SUBJECTS = frozenset(_CLAUSE_SUBJECT_TEXT.split())
_COMMAND_OPENER_TEXT = """
set turn play stop tell read add call pause cancel repeat switch open close start skip
put give find show text send remind wake lower raise dim check translate count spell
go say shuffle next let's please be search look order book make remember
"""
_COMMAND_OPENERS = frozenset(_COMMAND_OPENER_TEXT.split())


class Cue(enum.Enum):
    """What the first words of an utterance say about it."""

    NONE = "none"
    QUESTION = "question"
    COMMAND = "command"
    REMEMBER = "remember"

    @property
    def weight(self) -> float:
        """The score shift this cue carries."""
        if self is Cue.REMEMBER:
            return CUE_WEIGHT
        if self is Cue.NONE:
            return 0.0
        return -CUE_WEIGHT


def opening_cue(text: str) -> Cue:
    """The cue of an utterance's opening (and of a closing question mark), read past its
    fillers and openers ("um so what's ..." opens a question; :mod:`home.memory.spoken`)."""
    opening = read_opening(text)
    if opening.remember:
        return Cue.REMEMBER
    if text.strip().endswith("?"):
        return Cue.QUESTION
    words = _WORD.findall(opening.rest.lower())
    if words and words[0] in _QUESTION_OPENERS:
        clause = words[0] in _BARE_WH and len(words) > 1 and words[1] in _CLAUSE_SUBJECTS
        return Cue.NONE if clause else Cue.QUESTION
    if words and words[0] in _COMMAND_OPENERS:
        return Cue.COMMAND
    return Cue.NONE


@dataclass(frozen=True)
class Prototypes:
    """The embedded examples: unit rows, one matrix per side."""

    keep: Vectors
    skip: Vectors


@dataclass(frozen=True)
class Verdict:
    """The gate's decision on one utterance: keep or skip, and the score it came from."""

    keep: bool
    score: float
    cue: Cue

    @property
    def decision(self) -> str:
        """``keep`` or ``skip``."""
        return "keep" if self.keep else "skip"


def nearest_mean(vector: Vectors, examples: Vectors, neighbours: int = NEIGHBOURS) -> float:
    """Mean cosine of ``vector`` to its ``neighbours`` nearest unit rows of ``examples``."""
    similarities = examples @ vector
    top = np.sort(similarities)[-neighbours:]
    return float(top.mean())


def judge(vector: Vectors, text: str, prototypes: Prototypes, *, cues: bool = True) -> Verdict:
    """Keep or skip one utterance, given its unit embedding and its text.

    With ``cues`` off the opening is not read (every cue is :attr:`Cue.NONE`): the
    embeddings decide alone, which measures what the cue lists add.
    """
    cue = opening_cue(text) if cues else Cue.NONE
    margin = nearest_mean(vector, prototypes.keep) - nearest_mean(vector, prototypes.skip)
    score = margin + cue.weight
    return Verdict(keep=score >= THRESHOLD, score=round(score, 4), cue=cue)


@dataclass(frozen=True)
class Examples:
    """The example utterances of each side, as read from the examples file."""

    keep: tuple[str, ...]
    skip: tuple[str, ...]


def read_examples(path: Path = EXAMPLES_FILE) -> Examples:
    """Read a ``keep:``/``skip:`` file of example utterances; errors name the file and key."""
    try:
        raw = load_yaml(path)
    except SchemaError as exc:  # names the file and, for bad YAML, the line
        raise KeepGateError(f"the keep gate's examples: {exc}") from exc
    if not isinstance(raw, dict):
        raise KeepGateError(f"{path}: expected a mapping with 'keep' and 'skip', got {raw!r:.80}")
    sides: dict[str, tuple[str, ...]] = {}
    for side in ("keep", "skip"):
        items = raw.get(side)
        if not isinstance(items, list) or len(items) < NEIGHBOURS:
            raise KeepGateError(
                f"{path}: {side!r}: expected a list of at least {NEIGHBOURS} utterances"
            )
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item.strip():
                raise KeepGateError(f"{path}: {side}[{i}]: expected an utterance, got {item!r}")
        sides[side] = tuple(item.strip() for item in items)
    return Examples(keep=sides["keep"], skip=sides["skip"])


class KeepGate:
    """The examples embedded once, and an embedder to judge new utterances with."""

    def __init__(self, embedder: Embedder, examples: Examples) -> None:
        self.embedder = embedder
        self.examples = examples
        self.prototypes = Prototypes(
            keep=self._embed(examples.keep), skip=self._embed(examples.skip)
        )

    def _embed(self, texts: Sequence[str]) -> Vectors:
        try:
            return self.embedder.embed(texts)
        except Exception as exc:  # the embedder's own failures stop here, named
            raise KeepGateError(f"the embedder failed on {len(texts)} utterances: {exc}") from exc

    def judge(self, texts: Sequence[str], *, cues: bool = True) -> list[Verdict]:
        """A verdict per utterance, in order (``cues`` as for :func:`judge`)."""
        if not texts:
            return []
        vectors = self._embed(texts)
        return [
            judge(vector, text, self.prototypes, cues=cues)
            for vector, text in zip(vectors, texts, strict=True)
        ]


def load_keep_gate(embedder: Embedder | None = None, examples: Path = EXAMPLES_FILE) -> KeepGate:
    """The gate over the shipped examples, with JMFTS's MiniLM graph unless told otherwise.

    One onnxruntime thread: the gate runs beside the language model on a small machine.
    """
    if embedder is None:
        # Imported here: onnxruntime loads only when a gate is actually built.
        from home.jmfts.embedder import OnnxMiniLM  # noqa: PLC0415
        from home.jmfts.errors import EmbedderError  # noqa: PLC0415

        try:
            embedder = OnnxMiniLM(threads=1)
        except EmbedderError as exc:
            raise KeepGateError(f"the keep gate has no embedder: {exc}") from exc
    return KeepGate(embedder, read_examples(examples))
