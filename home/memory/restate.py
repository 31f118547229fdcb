"""The draft: a kept utterance in the third person, in the user's own words. Pure.

"um so my sister ingrid lives in trondheim" → "The user's sister ingrid lives in
trondheim." Fillers, openers and requests to remember go (:mod:`home.memory.spoken`),
first-person words become "the user" (and "the user's", "the user's household"), and a
verb after "the user" takes the third person. Nothing else changes, so every content
word of a draft was said (:mod:`home.memory.fidelity` checks it all the same).

This is what the reflex stores for the embedded model: measured on the fidelity set
(``make bench NAME=memory_fidelity``), SmolLM2-135M restating an utterance under a
grammar that let it write any words put content nobody said into about half of its
memories ("my sister Ingrid lives in Trondheim" → "The user's name: Theresa"); the draft
invents none by construction.
"""

from __future__ import annotations

import re

from home.memory.spoken import read_opening, without_fillers

# First-person words and what the user is called instead, lower case; longest first so
# "I'm" is read before "I".
_PERSON_SWAP = {
    "i'm": "the user is",
    "i am": "the user is",
    "i've": "the user has",
    "i'd": "the user would",
    "i'll": "the user will",
    "i was": "the user was",
    "i": "the user",
    "me": "the user",
    "my": "the user's",
    "mine's": "the user's is",
    "mine": "the user's",
    "myself": "the user",
    "we're": "the user's household is",
    "we are": "the user's household is",
    "we were": "the user's household was",
    "we have": "the user's household has",
    "we've": "the user's household has",
    "we": "the user's household",
    "us": "the user's household",
    "our": "the user's",
    "ours": "the user's",
}
_SWAP = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in sorted(_PERSON_SWAP, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
# After "the user" (from "I") a verb takes the third person: "I love" → "the user loves",
# also behind an adverb ("I really enjoy" → "the user really enjoys").
_ADVERBS = "really|always|usually|also|often|sometimes|still|just|never|rarely"
# Words after "the user" that take no "-s": auxiliaries, irregular pasts, and the words
# that follow a subject without being its verb ("me and my wife live ...").
_NOT_VERB_TEXT = """
is was has would will can can't could couldn't should must might may used had did
didn't doesn't the a an and or but nor to in at on of with for from so not too as if
that who which when while because both myself alone
went grew met got made took came saw left ran bought began broke drove ate fell felt
found gave knew lost paid put read sold sent spent stood taught thought told won wrote
became brought built caught chose forgot heard held hurt kept let meant quit rode rang
sang sat slept spoke swam threw understood woke wore
off out up down over back away round around onto through about
"""
_NOT_VERBS = frozenset(_NOT_VERB_TEXT.split())
_THE_USER_VERB = re.compile(rf"\bthe user ((?:(?:{_ADVERBS}) )?)([a-z']+)\b")


def _third_person(match: re.Match[str]) -> str:
    adverb, verb = match.group(1), match.group(2)
    if verb in _NOT_VERBS or verb.endswith(("ed", "s", "'s")):
        return match.group(0)
    if verb == "don't":
        verb = "doesn't"
    elif verb == "have":
        verb = "has"
    elif verb.endswith(("ch", "sh", "x", "o")):
        verb += "es"
    elif verb.endswith("y") and verb[-2:-1] not in "aeiou":
        verb = verb[:-1] + "ies"
    else:
        verb += "s"
    return f"the user {adverb}{verb}"


def restate_draft(utterance: str) -> str | None:
    """The utterance in the third person, as one sentence; None when nothing is left of it
    once its opening is read ("remember that", "um okay")."""
    text = without_fillers(read_opening(utterance).rest).strip(" .!?,;:-")
    if not text:
        return None
    # A word the case-blind match took for a first-person one but is not ("İ", whose lower
    # case is two characters; found by hypothesis) stays as it was said.
    swapped = _SWAP.sub(lambda m: _PERSON_SWAP.get(m.group(1).lower(), m.group(1)), text)
    swapped = _THE_USER_VERB.sub(_third_person, swapped)
    if "the user" not in swapped.lower():
        swapped = f"the user said: {swapped}"
    return swapped[:1].upper() + swapped[1:] + "."
