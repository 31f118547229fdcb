"""The evaluator: what it is asked, how its answer is read, and how a fact is deduplicated.

Two forms, chosen by whether the evaluator's model declares a grammar dialect:

- **Conversation** (a model without a grammar, such as one behind ``--llm-url``): a
  forked sub-agent (τ ``spawn_branch``) sees the conversation up to the captured
  position and answers in plain lines, one fact per ``- `` line, or ``NONE``. It judges
  worth and words the facts; each is then checked against what was said
  (:mod:`home.memory.extract`).
- **Utterance** (a model with a grammar: the embedded SmolLM2-135M): the keep gate
  decides what is worth keeping (the 135M model cannot say "nothing here") and each
  kept utterance is stored as its draft, the user's own words in the third person
  (:mod:`home.memory.restate`). The model is not asked: restating under a grammar it
  invented content (:mod:`home.memory.extract`).

Either way the evaluator has no tools: the deposit is the reflex's, under the agent's
principal, never the model's to skip or to call. Each fact is searched against the
memory root first: a stored memory this close to it is the same memory (identical
text: left as is; different: superseded by the new wording), so telling a thing twice
stores it once; and a fact that gives a stored one's slot a new value ("The user's dog is
called Rex now." after "... Biscuit.") corrects it (:mod:`home.memory.correction`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from home.memory.correction import common_stems, corrects, revision_overlap
from home.memory.fidelity import content_stems
from home.memory.memories import StoredMemory

EVALUATOR_MARKER = "[memory evaluator]"
EVALUATOR_SYSTEM = (
    f"{EVALUATOR_MARKER} You decide what is worth remembering from a conversation "
    "between a user and a voice assistant. Keep durable facts about the user and their "
    "world (names, preferences, plans, places, dates), each as one short standalone "
    "sentence in the third person. Skip greetings, questions, small talk and anything "
    "the assistant said on its own. Answer only with lines that start with '- ', one "
    "fact per line, or the single word NONE.\n"
    "Use the user's own words and names; never add a name, place, number or detail "
    "they did not say.\n"
    "Example: the user said 'my sister Ana moved to Porto last week'. You answer:\n"
    "- The user's sister Ana moved to Porto last week."
)
EVALUATOR_PROMPT = (
    "Read the conversation above, most of all its latest turns. What in it is worth "
    "remembering? One fact per line starting with '- ', or NONE."
)
MAX_FACTS = 8
MAX_FACT_CHARS = 400

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")


def parse_facts(text: str) -> list[str]:
    """The facts in the evaluator's answer (``NONE`` or no bullets: none), deduplicated."""
    if text.strip().upper().rstrip(".") == "NONE":
        return []
    facts: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        match = _BULLET.match(line)
        if match is None:
            continue
        fact = " ".join(match.group(1).split())[:MAX_FACT_CHARS]
        key = normalized(fact)
        if fact.upper().rstrip(".") == "NONE" or not key or key in seen:
            continue
        seen.add(key)
        facts.append(fact)
    return facts[:MAX_FACTS]


def normalized(text: str) -> str:
    """Text compared for identity: case, punctuation and spacing ignored."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@dataclass(frozen=True)
class Decision:
    """What to do with one fact: write it, correct or supersede a stored one, or leave it."""

    action: Literal["create", "correct", "supersede", "reinforce"]
    existing: StoredMemory | None = None

    @property
    def nearest_score(self) -> float | None:
        """The score of the near-duplicate it was judged against, if any."""
        return None if self.existing is None else self.existing.score


def decide(
    fact: str, nearest: list[StoredMemory], dedup_threshold: float, replaces: str | None = None
) -> Decision:
    """Judge ``fact`` against the stored memories nearest to it (best first).

    Identical text reinforces the memory it restates; a memory whose slot the fact fills
    with another value is corrected (:mod:`home.memory.correction`); a near-duplicate is
    reinforced when the fact adds no content word to it, else superseded; failing all
    these, the nearest memory the fact revises (it says what changed) is corrected, or
    the nearest that holds the value the fact says is no longer so (``replaces``: "it's
    tuesdays not mondays" corrects the memory that says mondays).
    """
    for memory in nearest:
        if normalized(memory.content) == normalized(fact):
            return Decision("reinforce", memory)
    for memory in nearest:
        if corrects(fact, memory.content):
            return Decision("correct", memory)
    if nearest and nearest[0].score >= dedup_threshold:
        if content_stems(fact) <= content_stems(nearest[0].content):
            return Decision("reinforce", nearest[0])
        return Decision("supersede", nearest[0])
    revised = _revised(fact, nearest, replaces)
    return Decision("create") if revised is None else Decision("correct", revised)


def _revised(fact: str, nearest: list[StoredMemory], replaces: str | None) -> StoredMemory | None:
    """The memory ``fact`` revises (of several, the one sharing most words, then the
    nearest; a word most of them share, as "biscuit", links none), else the nearest
    holding the value it says is no longer so."""
    common = common_stems(m.content for m in nearest)
    overlaps = [(revision_overlap(fact, m.content, m.score, common), m.score, m) for m in nearest]
    revised = [(overlap, score, m) for overlap, score, m in overlaps if overlap > 0]
    if revised:
        return max(revised, key=lambda r: (r[0], r[1]))[2]
    old = content_stems(replaces or "")
    holding = [m for m in nearest if old and old <= content_stems(m.content)]
    return holding[0] if holding else None


def assistant_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last assistant message among a branch's messages."""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return ""
