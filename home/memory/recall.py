"""The recall gate and what the model is shown: pure functions, no I/O.

A hit passes the gate when its cosine score is at or above the threshold: time never
hides a memory that answers the question. On a decaying root, time ranks: a hit's rank
score is its cosine times a weight that sinks from 1 toward ``RANK_FLOOR`` as its FSRS
retrievability falls (:mod:`home.memory.fsrs`), so among the candidates a recall finds
(more than it shows) a memory reviewed or said lately comes before one left alone for
months, and of a fact said twice with two values the later one ranks first. The first
``shown`` passing hits by rank are threaded ahead of the utterance, preferences first
(:mod:`home.memory.kinds`), then oldest first, each
with its age in words, so a later memory reads as a revision of an earlier one and the
model never does date arithmetic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from home.memory.correction import (
    change_said,
    common_stems,
    corrects,
    shares_and_brings,
    subject_stems,
)
from home.memory.memories import StoredMemory

MEMORY_TEXT_CHARS = 500
#: The least a memory's rank weight sinks to, however long it was left unreviewed:
#: chosen by the life benchmark's tuning half at 90 days (tests/bench/memory_life.py):
#: floor 0.5 / 0.7 / 0.85 / 1.0 gave recall@5 0.82 / 0.84 / 0.85 / 0.84, facts never
#: corrected out of reach 6.3 / 3.2 / 3.2 / 3.2 %, stale after a correction at 30 days
#: 12 / 10 / 19 / 24 %. Lower, a fresh weak match pushes an old strong one out of the k.
RANK_FLOOR = 0.7
RECALL_HEADER = (
    "Memories recalled for this turn, the user's preferences first, then oldest first "
    "(each with its age; a later one may revise an earlier one). Use them only if they help:"
)

# Said to the model when a recall root failed or timed out (the recall report says which).
MEMORY_UNAVAILABLE = (
    "Memory is unavailable right now: what you remember about the user could not be "
    "searched for this turn. If the answer depends on it, say memory is unavailable."
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Words that carry no fact: a reply sharing only these with a memory did not use it.
_STOPWORD_TEXT = """
a about above after again all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if
in into is it its itself just me more most my myself no nor not now of off on once
only or other our ours ourselves out over own same she should so some such than that
the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves said say says tell told know remember name
named called yes okay sure well like think
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class ScoredHit:
    """A hit as the gate judged it."""

    memory: StoredMemory
    root: str
    retrievability: float
    score: float  # the rank score: cosine times the rank weight
    passed: bool

    @property
    def raw_score(self) -> float:
        """The cosine score JMFTS returned: what the gate compares with the threshold."""
        return self.memory.score


def rank_weight(retrievability: float) -> float:
    """How much of its cosine a memory keeps in the ranking at retrievability R."""
    return RANK_FLOOR + (1.0 - RANK_FLOOR) * retrievability


def gate(
    hits: Iterable[tuple[str, StoredMemory]],
    threshold: float,
    retrievability_of: Callable[[str, StoredMemory], float],
    shown: int,
) -> list[ScoredHit]:
    """Rank every hit (best first, one per document) and mark the first ``shown`` whose
    cosine is at or above ``threshold`` as passed."""
    best: dict[int, ScoredHit] = {}
    for root, memory in hits:
        r = retrievability_of(root, memory)
        scored = ScoredHit(memory, root, r, memory.score * rank_weight(r), False)
        if memory.id not in best or best[memory.id].score < scored.score:
            best[memory.id] = scored
    ranked = sorted(best.values(), key=lambda h: (-h.score, h.memory.id))
    passed = 0
    for i, hit in enumerate(ranked):
        if passed < shown and hit.raw_score >= threshold:
            ranked[i] = replace(hit, passed=True)
            passed += 1
    return revisions_first(ranked)


def revises(newer: StoredMemory, older: StoredMemory, common: set[str]) -> bool:
    """Whether ``newer``, found beside ``older`` for one question, reads as its revision:
    said later, it fills the same slot with another value, or it says that something
    changed, shares a word with ``older`` that is not in ``common`` (what changed, not
    who it happened to) and brings a word of its own (the new value). ``common``: the
    words too many of the candidates share (:func:`~home.memory.correction.common_stems`)."""
    if newer.written_at <= older.written_at:
        return False
    if corrects(newer.content, older.content):
        return True
    if change_said(newer.content) is None:
        return False
    return shares_and_brings(subject_stems(newer.content), subject_stems(older.content), common)


def revisions_first(ranked: list[ScoredHit]) -> list[ScoredHit]:
    """``ranked`` with the revisions of each passed hit, found among all the candidates,
    moved just above it, the latest first, and passed: an old value never outranks what
    revised it, and is never hidden by it.

    The evaluator links a correction when it is written (:mod:`home.memory.correction`);
    one said in words too far from the memory it corrects is stored beside it. Recall
    finds the two together, and here the later one comes first, even when its own cosine
    is under the gate ("the gp's taken me off ramipril and put me on amlodipine instead"
    for "what medication am I on")."""
    common = common_stems(hit.memory.content for hit in ranked)
    out = list(ranked)
    looked_at: set[int] = set()
    i = 0
    while i < len(out):
        earlier = out[i]
        if not earlier.passed or earlier.memory.id in looked_at:
            i += 1
            continue
        looked_at.add(earlier.memory.id)
        below = [
            j for j in range(i + 1, len(out)) if revises(out[j].memory, earlier.memory, common)
        ]
        if below:
            # Its revisions take the place above it, the latest first, each looked at next.
            revisions = sorted(
                (out[j] for j in below), key=lambda h: (h.memory.written_at, h.memory.id)
            )
            out = [hit for j, hit in enumerate(out) if j not in below]
            score = earlier.score
            for hit in revisions:
                score = math.nextafter(score, math.inf)
                out.insert(i, replace(hit, score=score, passed=True))
        else:
            i += 1
    return out


def threaded(scored: Iterable[ScoredHit]) -> list[ScoredHit]:
    """The passed hits in the order they are shown: preferences first (what the user
    wants comes before what happened), then the rest oldest first."""
    return sorted(
        (h for h in scored if h.passed),
        key=lambda h: (h.memory.kind != "preference", h.memory.written_at, h.memory.id),
    )


def render_recall(passed: list[ScoredHit], unavailable: list[str] | None = None) -> str:
    """The message threaded ahead of the utterance.

    ``unavailable`` names the roots that failed: then the model is told, in one line,
    that memory is unavailable, so an outage does not read as "I don't remember".
    """
    lines = [MEMORY_UNAVAILABLE] if unavailable else []
    if not passed:
        return "\n".join(lines)
    lines.append(RECALL_HEADER)
    for hit in passed:
        text = " ".join(hit.memory.content.split())
        if len(text) > MEMORY_TEXT_CHARS:
            text = text[: MEMORY_TEXT_CHARS - 1].rstrip() + "…"
        lines.append(f"- ({hit.memory.age or 'age unknown'}) {text}")
    return "\n".join(lines)


def content_words(text: str) -> set[str]:
    """The words of ``text`` that can carry a fact (lower case, no stopwords, len ≥ 3)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOPWORDS}


def used_by_reply(memory: str, utterance: str, reply: str) -> bool:
    """Whether the reply used the memory: it repeats a word the memory has and the
    utterance did not bring (the question's own words prove nothing)."""
    brought = content_words(memory) - content_words(utterance)
    return bool(brought & content_words(reply))
