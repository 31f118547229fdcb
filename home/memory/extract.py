"""From what was said to what is stored: one path for the reflex and ``home memory judge``. Pure.

Two ways a memory is written, one per evaluator form (:mod:`home.memory.evaluator`), and
every memory says which (``path``, in the memorize report and in its provenance):

- **draft** (the utterance form: the embedded model): each utterance the keep gate
  kept becomes its draft (:func:`home.memory.restate.restate_draft`), the user's own
  words in the third person. The model supplies nothing: a 135M model restating under a
  grammar invented content in about half of its memories (``make bench
  NAME=memory_fidelity``), so it is not asked.
- **model** (the conversation form: a model without a grammar, such as one behind
  ``--llm-url``): the model names and words the facts; it may paraphrase.

Either way each memory is checked against its sources, the utterances it came from and
what recall showed on those turns (:func:`home.memory.fidelity.check`), and one with a
content word from none of them is refused, with the words, never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from home.memory.fidelity import Fidelity, check
from home.memory.restate import restate_draft

ExtractionPath = Literal["draft", "model"]


@dataclass(frozen=True)
class Extracted:
    """One memory as written, where from, and whether its content was said."""

    memory: str
    path: ExtractionPath
    said: tuple[str, ...]
    recalled: tuple[str, ...] = field(default=())
    invented: tuple[str, ...] = field(default=())

    @property
    def faithful(self) -> bool:
        """Whether it may be stored: every content word is in ``said`` or ``recalled``."""
        return not self.invented

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "memory": self.memory,
            "path": self.path,
            "said": list(self.said),
            "invented": list(self.invented),
        }


def _checked(
    memory: str, path: ExtractionPath, said: Sequence[str], recalled: Sequence[str]
) -> Extracted:
    fidelity: Fidelity = check(memory, [*said, *recalled])
    return Extracted(memory, path, tuple(said), tuple(recalled), fidelity.invented)


def drafted(utterance: str) -> Extracted | None:
    """The draft path for one kept utterance (None: nothing is left once its opening is read).
    Checked against the utterance alone: a draft has no other source."""
    draft = restate_draft(utterance)
    return None if draft is None else _checked(draft, "draft", (utterance,), ())


def from_model(
    facts: Sequence[str], said: Sequence[str], recalled: Sequence[str] = ()
) -> list[Extracted]:
    """The model path: each fact the model named, checked against the window it read."""
    return [_checked(fact, "model", said, recalled) for fact in facts]
