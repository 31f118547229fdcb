"""Whether a new memory corrects a stored one: the fact's slot, read from its words. Pure.

The evaluator writes every fact as ``The user's <subject> <relation> <value>`` (the
embedded model under its grammar; a larger model is asked for the same shape). Two facts
are about the same thing when subject and relation agree and the value differs:
"The user's dog is called Biscuit." and "The user's dog is called Rex now." share the
slot ``dog / is called`` and the second replaces the first. Embedding similarity cannot
decide this alone (measured with MiniLM: that pair scores 0.55, while "The user's dog is
called Biscuit." against "The user's cat is called Biscuit." scores 0.84), so the slot
decides and the score only finds the candidates.

"The user <relation> <value>" is read too, with the user as the subject ("The user lives
in Leeds.", "The user works as a nurse."), except after a bare copula: "The user is
vegetarian." and "The user is allergic to nuts." are two things, not one. A relation whose
verb holds many values at once (likes, plays, speaks, has, ...) forms no slot: liking jazz
is no correction of liking pizza.

A fact said in the user's own words rarely reads as a slot ("it's thursdays for maya's
piano now, not tuesdays"). Such a fact *revises* a stored one
(:func:`revision_overlap`) when it says that something changed (a change word:
"anymore", "instead", "changed", "moved", "new", "not ...", "scratch that" ...; or
only "now", when it must be nearer), shares a content word with it that its change
is about (the subject: "maya", "piano"), and brings a word the stored one lacks (the
new value); of the memories it revises the evaluator takes the one it shares most
words with, the nearest on a tie. A fact that neither fills a slot
nor revises corrects nothing; it can still replace a near-duplicate
(:func:`home.memory.evaluator.decide`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from dataclasses import dataclass

from home.memory.fidelity import content_stems, stem

_OPENING = re.compile(r"^\s*(?:the\s+)?user('s)?\s+", re.IGNORECASE)
USER = "the user"
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
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
# Words that say the fact is new or sure, not what it is: "is called Rex now", "is indeed
# green" (the embedded model's wording of "... green now").
FILLER_WORDS = frozenset(
    {"now", "still", "currently", "anymore", "actually", "indeed", "really", "also"}
)
AUXILIARIES = frozenset({"has", "have", "had"})
_MULTI_TEXT = """
has have had likes like liked loves love loved hates hate hated plays play speaks speak
eats eat drinks drink visits visit uses use wants want needs need goes go takes take gets
get owns own
"""
# Verbs whose facts add up rather than replace each other.
MULTI_VALUED = frozenset(_MULTI_TEXT.split())
COPULAS = frozenset({"is", "are", "was", "were"})
_PREPOSITION_TEXT = "in at on to from of with for by as into near"
PREPOSITIONS = frozenset(_PREPOSITION_TEXT.split())
# Relations that name the same slot: a name given either way, a home however reached.
RELATION_SYNONYMS = {
    "is named": "is called",
    "moved to": "lives in",
    "moves to": "lives in",
    "live in": "lives in",
    "lived in": "lives in",
}


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
        if self.subject == USER:
            return f"The user {self.relation}"
        return f"The user's {self.subject} {self.relation}"


def read_slot(fact: str) -> Slot | None:
    """The slot of ``The user's <subject> <relation> <value>``, or None if it reads as none."""
    opening = _OPENING.match(fact)
    if opening is None:
        return None
    possessive = opening.group(1) is not None
    cased = _WORD.findall(fact[opening.end() :])
    words = [w.lower() for w in cased]
    verb = next((i for i, w in enumerate(words) if w in RELATION_VERBS), None)
    if verb is None or (verb == 0) == possessive:
        return None
    subject = words[:verb] if possessive else [USER]
    relation = [words[verb]]
    after = zip(words[verb + 1 :], cased[verb + 1 :], strict=True)
    rest = [(w, c) for w, c in after if w not in FILLER_WORDS]
    if relation[0] in AUXILIARIES and rest and rest[0][0] in RELATION_VERBS:
        relation = [rest.pop(0)[0]]  # "has moved to Lisbon": the verb is "moved"
    while rest and rest[0][0] in RELATION_TAIL:
        relation.append(rest.pop(0)[0])
    if not rest:
        return None
    if relation[0] in COPULAS:
        # "is in May" / "is June", "is black" / "is with oat milk": one slot, the value's
        # preposition is part of the value.
        relation = [w for w in relation if w not in PREPOSITIONS]
    if relation == ["is"] and rest[0][1][:1].isupper():
        relation = ["is", "called"]  # "The user's dog is Rex.": a name
    bare_copula = relation[0] in COPULAS and relation != ["is", "called"]
    if relation[0] in MULTI_VALUED or (not possessive and bare_copula):
        return None
    joined = " ".join(relation)
    return Slot(
        " ".join(subject), RELATION_SYNONYMS.get(joined, joined), " ".join(w for w, _ in rest)
    )


def corrects(new: str, old: str) -> bool:
    """Whether ``new`` states a different value for the slot ``old`` fills. What someone
    is doing fills no slot: "the household is going to portugal" leaves "the household
    is at number 27" as it was."""
    new_slot, old_slot = read_slot(new), read_slot(old)
    if new_slot is None or old_slot is None or _doing(new_slot) or _doing(old_slot):
        return False
    return new_slot.key == old_slot.key and new_slot.value != old_slot.value


# Nouns that end as a verb doing something does.
_ING_NOUNS = frozenset(
    {"morning", "mornings", "evening", "evenings", "thing", "things", "something",
     "nothing", "wedding", "building", "spring", "ceiling", "sibling", "siblings"}
)  # fmt: skip


def _doing(slot: Slot) -> bool:
    """Whether a bare "is" slot says what its subject is doing ("is going to ...")."""
    first = slot.value.split()[0] if slot.value else ""
    return slot.relation in {"is", "are"} and first.endswith("ing") and first not in _ING_NOUNS


# Words and phrases that say something changed; matched as whole words, lower case.
# Strong: they say it outright. Weak: a new fact says them too ("leo's a size thirteen
# now"), so a weak change must be nearer the memory it revises.
_CHANGE_TEXT = """
anymore instead changed change changing moved moving switched swapped replaced
replacing new newer renamed retired quit correction scratch wrong mistake
"""
CHANGE_WORDS = frozenset(_CHANGE_TEXT.split())
WEAK_CHANGE_WORDS = frozenset({"now", "actually"})
_CHANGE_PHRASES = re.compile(
    r"\b(?:no longer|any more|from now on|no wait|not (?:any|the|on|at|in)?\s*[a-z0-9]+"
    r"|old news|got rid of|gave up|traded in|took over)\b"
)
#: The least cosine between a revision and the memory it revises, when the revision says
#: outright that something changed, and when it only says "now": below it the two are
#: about different things that share a word ("priya drives a fiat" / "priya is a nurse").
#: Chosen on the life benchmark's tuning half (tests/bench/memory_life.py).
REVISION_MIN_SCORE = 0.5
WEAK_REVISION_MIN_SCORE = 0.7


def change_said(text: str) -> str | None:
    """``"strong"`` when ``text`` says outright that something changed, ``"weak"`` when it
    only says "now" or "actually", else None."""
    lowered = re.sub(r"\bnow that\b", "", text.lower())  # "now that she's older": since
    words = set(re.findall(r"[a-z0-9]+", lowered))
    if words & CHANGE_WORDS or _CHANGE_PHRASES.search(lowered) is not None:
        return "strong"
    return "weak" if words & WEAK_CHANGE_WORDS else None


# Stems two facts may share without being about one thing: the change words themselves,
# and words that name rather than say what something is ("called" is no more a subject
# than "is").
_NOT_SUBJECT = frozenset({stem(w) for w in CHANGE_WORDS | WEAK_CHANGE_WORDS} | {"call", "name"})


def subject_stems(text: str) -> set[str]:
    """The content stems of ``text`` that may name what it is about (no change words)."""
    return content_stems(text) - _NOT_SUBJECT


#: A word more than this many of the memories found beside each other say (and say no
#: change in) is what many memories are about ("priya", "biscuit"), not what one of them
#: changed: it links no revision. Chosen on the life benchmark's tuning half: 1 and 2 gave
#: the same recall@5 and staleness, 2 the better recall@1 (tests/bench/memory_life.py).
REVISION_LINK_MAX_SHARERS = 2


def common_stems(texts: Iterable[str]) -> set[str]:
    """The subject stems more than :data:`REVISION_LINK_MAX_SHARERS` of ``texts`` that say
    no change share: who or what they are about, which links no revision."""
    counts: dict[str, int] = {}
    for text in texts:
        if change_said(text) is None:
            for word in subject_stems(text):
                counts[word] = counts.get(word, 0) + 1
    return {word for word, n in counts.items() if n > REVISION_LINK_MAX_SHARERS}


def revision_overlap(new: str, old: str, score: float, common: Set[str] = frozenset()) -> int:
    """How many content words ``new`` shares with ``old`` (``score``: their cosine) if it
    revises it, else 0: it says something changed, close enough for how it says so,
    shares a content word with it that is not in ``common`` (:func:`common_stems`) and
    brings one it lacks."""
    change = change_said(new)
    least = REVISION_MIN_SCORE if change == "strong" else WEAK_REVISION_MIN_SCORE
    if change is None or score < least:
        return 0
    new_stems, old_stems = subject_stems(new), subject_stems(old)
    if not new_stems - old_stems:
        return 0
    return len((new_stems & old_stems) - common)


def shares_and_brings(new: set[str], old: set[str], common: Set[str] = frozenset()) -> bool:
    """Whether stems ``new`` share one with ``old`` that is not in ``common`` (what changed,
    not who it happened to) and bring one ``old`` lacks (the new value)."""
    return bool((new & old) - common) and bool(new - old)


#: How far under the keep gate's boundary a correction may score and still be kept when
#: it revises a memory recall showed on its turn. Corrections score like facts; chatter
#: that says "not" or "new" (questions, commands, small talk) mostly far lower.
CORRECTION_KEEP_MARGIN = 0.05


def revises_recalled(utterance: str, score: float, recalled: list[str]) -> bool:
    """Whether ``utterance``, which the keep gate scored ``score`` (its margin, skipped
    under 0), is a correction to keep all the same: it scores within
    :data:`CORRECTION_KEEP_MARGIN` of keeping, says outright that something changed,
    and shares a word with a memory in ``recalled`` (what recall showed on its turn)
    while bringing one of its own. A correction lost leaves the old value standing."""
    if score < -CORRECTION_KEEP_MARGIN or change_said(utterance) != "strong":
        return False
    said = subject_stems(utterance)
    return any(shares_and_brings(said, subject_stems(memory)) for memory in recalled)
