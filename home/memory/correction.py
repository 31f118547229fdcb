"""Whether a new memory corrects a stored one: the fact's slot, read from its words. Pure.

The evaluator writes every fact as ``The user's <subject> <relation> <value>`` (the
embedded model under its grammar; a larger model is asked for the same shape). Two facts
are about the same thing when subject and relation agree and the value differs:
"The user's dog is called Biscuit." and "The user's dog is called Rex now." share the
slot ``dog / is called`` and the second replaces the first. Embedding similarity cannot
decide this alone (measured with MiniLM: that pair scores 0.55, while "The user's dog is
called Biscuit." against "The user's cat is called Biscuit." scores 0.84), so the slot
decides and the score only finds the candidates.

A fact that does not read as a slot (no relation word after the subject) corrects
nothing; it can still replace a near-duplicate (:func:`home.memory.evaluator.decide`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPENING = re.compile(r"^\s*(?:the\s+)?user'?s\s+", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# The verbs a fact's relation starts with. Closed on purpose: a word not here is read as
# part of the subject, so an unknown verb makes the slot longer (more specific), never
# merges two different things.
_VERB_TEXT = """
    is are was were has have had lives live lived works work worked likes like liked loves
    love loved hates hate hated prefers prefer preferred drives drive plays play studies
    study goes go wants want needs need owns own speaks speak eats eat drinks drink uses
    use starts start finishes finish visits visit moved moves comes come teaches teach
    takes take gets get runs run leaves leave
"""
RELATION_VERBS = frozenset(_VERB_TEXT.split())
# Words that join a relation to its value: "is called", "lives in", "is a".
_TAIL_TEXT = "called named in at on a an the to from of with for by as into near"
RELATION_TAIL = frozenset(_TAIL_TEXT.split())
# Words that say the fact is new, not what it is: "is called Rex now", "now lives in ...".
TENSE_WORDS = frozenset({"now", "still", "currently", "anymore", "actually"})


@dataclass(frozen=True)
class Slot:
    """What a fact is about (subject and relation) and what it says (value)."""

    subject: str
    relation: str
    value: str

    @property
    def key(self) -> tuple[str, str]:
        """The part two facts about the same thing share."""
        return (self.subject, self.relation)

    @property
    def phrase(self) -> str:
        """The slot as words without its value ("The user's dog is called"), to search by."""
        return f"The user's {self.subject} {self.relation}"


def read_slot(fact: str) -> Slot | None:
    """The slot of ``The user's <subject> <relation> <value>``, or None if it reads as none."""
    opening = _OPENING.match(fact)
    if opening is None:
        return None
    words = _WORD.findall(fact[opening.end() :].lower())
    verb = next((i for i, w in enumerate(words) if w in RELATION_VERBS), None)
    if verb is None or verb == 0:
        return None
    subject = words[:verb]
    relation = [words[verb]]
    rest = [w for w in words[verb + 1 :] if w not in TENSE_WORDS]
    while rest and rest[0] in RELATION_TAIL:
        relation.append(rest.pop(0))
    if not rest:
        return None
    return Slot(" ".join(subject), " ".join(relation), " ".join(rest))


def corrects(new: str, old: str) -> bool:
    """Whether ``new`` states a different value for the slot ``old`` fills."""
    new_slot, old_slot = read_slot(new), read_slot(old)
    if new_slot is None or old_slot is None:
        return False
    return new_slot.key == old_slot.key and new_slot.value != old_slot.value
