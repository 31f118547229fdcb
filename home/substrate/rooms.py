"""The right room: one utterance heard by several boards is answered on one of them (pure).

A board stamps each turn with how well it heard it (:class:`shared.messages.voice.Heard`:
the wake word model's probability, then the voiced level). Once the router has had
heard turns from two or more devices, it holds each heard turn for
:data:`WINDOW_S`; turns from other devices with the same words (after folding case
and punctuation, or nearly the same: boards mishear differently) join it, and when
the window closes the best heard one is delivered and the others are dropped as
:data:`home.substrate.routing.ELSEWHERE`, counted and logged. A matching turn that arrives after its
group was settled is dropped too: that utterance is being answered already.

Typed turns (the TUI) carry no ``heard`` and are never held. With one board, nothing
is held either: the first time a second board is heard, its duplicate of an
utterance the first board already delivered is dropped late, and from then on the
two are arbitrated (docs/architecture.md "The right room").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Generic, TypeVar

# How long a heard turn waits for the same words from another board.
WINDOW_S = 0.5
# How long after its window a group still catches late copies of its utterance.
LATE_S = 3.0
# How long a device counts as a board that hears (since its last heard turn).
ACTIVE_S = 7 * 24 * 3600.0
# Two transcripts this similar (difflib ratio of the folded words) are one utterance.
SAME_WORDS = 0.8

_PUNCTUATION = re.compile(r"[^\w\s]+")

T = TypeVar("T")


def fold(text: str) -> str:
    """Lower case, no punctuation, single spaces: what two boards' transcripts share."""
    return " ".join(_PUNCTUATION.sub(" ", text.casefold()).split())


@dataclass
class Heard(Generic[T]):
    """One heard turn offered for arbitration; ``item`` is the router's delivery."""

    device: str
    words: str
    score: tuple[float, float]
    item: T


@dataclass
class Group(Generic[T]):
    """The heard turns of one utterance: who heard it, and when its window closes."""

    key: str  # the schema the turns are routed for
    words: str
    closes_at: float
    turns: list[Heard[T]] = field(default_factory=list)
    settled: bool = False

    def best(self) -> Heard[T]:
        """The turn heard best: highest wake probability, then loudest; first on a tie."""
        return max(self.turns, key=lambda t: t.score)


@dataclass(frozen=True)
class Deliver(Generic[T]):
    """Deliver this turn now."""

    turn: Heard[T]


@dataclass(frozen=True)
class Hold(Generic[T]):
    """Held in ``group``; ``opened`` when this turn opened it (the caller settles it at
    ``group.closes_at``)."""

    group: Group[T]
    opened: bool


@dataclass(frozen=True)
class Late(Generic[T]):
    """A copy of an utterance ``group`` already delivered: drop it."""

    group: Group[T]


class Rooms(Generic[T]):
    """Groups heard turns by words across devices; the clock is the caller's."""

    def __init__(
        self, window_s: float = WINDOW_S, late_s: float = LATE_S, active_s: float = ACTIVE_S
    ) -> None:
        self.window_s = window_s
        self.late_s = late_s
        self.active_s = active_s
        self._last_heard: dict[str, float] = {}
        self._groups: list[Group[T]] = []

    def offer(self, key: str, turn: Heard[T], now: float) -> Deliver[T] | Hold[T] | Late[T]:
        """What to do with ``turn``, routed for ``key``, arriving at monotonic ``now``."""
        self._groups = [g for g in self._groups if now <= g.closes_at + self.late_s]
        self._last_heard[turn.device] = now
        others = [d for d, at in self._last_heard.items() if d != turn.device]
        for group in self._groups:
            if group.key != key or not _same_words(group.words, turn.words):
                continue
            if any(t.device == turn.device for t in group.turns):
                continue  # the same board again: the person said it twice
            if group.settled:
                return Late(group)
            group.turns.append(turn)
            return Hold(group, opened=False)
        group = Group(key, turn.words, now + self.window_s, [turn])
        self._groups.append(group)
        if not any(now - self._last_heard[d] <= self.active_s for d in others):
            group.settled = True  # one board: nothing to wait for
            return Deliver(turn)
        return Hold(group, opened=True)

    def settle(self, group: Group[T]) -> tuple[Heard[T], list[Heard[T]]]:
        """Close ``group``'s window: the turn to deliver, and the ones to drop."""
        group.settled = True
        best = group.best()
        return best, [t for t in group.turns if t is not best]


def _same_words(a: str, b: str) -> bool:
    return a == b or SequenceMatcher(None, a, b).ratio() >= SAME_WORDS
