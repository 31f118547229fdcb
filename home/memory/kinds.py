"""What kind of memory a kept fact is, filed as its usetype. Pure.

Every memory the reflex keeps is one of five kinds, stored as the usetype
``memory:<kind>`` so a search can ask for one kind (``usetype="memory:preference"``) or
all (``memory:*``), and recall shows preferences ahead of the rest (the seeds' order:
what the user wants first, then what happened, oldest first). Decided on the draft's
words, first match wins:

- ``preference``: what someone likes, loves, hates, prefers or would rather;
- ``routine``: what recurs on a schedule ("every", "on tuesdays", "twice a week");
- ``event``: what happens once, on a day or at a time ("tomorrow", "next saturday",
  "on the fourteenth of may", an appointment, a flight);
- ``person``: who someone other than the user is, a person or a pet (the claim's subject,
  :mod:`home.memory.heads`, or a being the household has "called" something);
- ``fact``: anything else.

A memory written before kinds existed has no usetype and reads as a ``fact``. Measured
on a labelled set written before this code (``tests/home/memory/kinds_*.yaml``, a
tuning and a held-out half). See docs/architecture.md "Memory".
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from home.jmfts.models import MEMORY_USETYPE_PREFIX
from home.memory.heads import MULTI_WORD_PEOPLE, PEOPLE, PETS, Claim, read_claim

#: The kinds (``home.jmfts.models.MEMORY_KINDS``, which the CLI offers), typed.
MemoryKind = Literal["preference", "routine", "event", "person", "fact"]
#: The kinds in the order recall shows them (then oldest first within one).
KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)
USETYPE_PREFIX = MEMORY_USETYPE_PREFIX
#: A glob for every kind of memory.
ANY_KIND = USETYPE_PREFIX + "*"

_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
_DAY = "(?:" + "|".join(_WEEKDAYS.split()) + ")"
_MONTH = "(?:january|february|march|april|june|july|august|september|october|november|december)"
_ORDINAL = (
    r"(?:\d+(?:st|nd|rd|th)|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|"
    r"tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|"
    r"eighteenth|nineteenth|twentieth|twenty first|twenty second|twenty third|"
    r"twenty fourth|twenty fifth|twenty sixth|twenty seventh|twenty eighth|twenty ninth|"
    r"thirtieth|thirty first)"
)
_PREFERENCE = re.compile(
    r"\b(?:loves?|loved|loving|adores?|likes?|liked|enjoys?|enjoyed|hates?|hated|"
    r"dislikes?|disliked|detests?|prefers?|preferred|favou?rites?|would rather|"
    r"can't stand|cannot stand|can't bear|fan of|keen on|fond of|"
    r"(?:would|'d) (?:like|love|prefer)|wants? (?:to be|it|them|things))\b"
)
_ROUTINE = re.compile(
    rf"\b(?:every|each|daily|weekly|fortnightly|monthly|nightly|yearly|annually|"
    rf"twice|once a|(?:three|four|five) times a|most (?:days|nights|mornings|evenings)|"
    rf"always|usually|normally|generally|often|weekdays|weekends|"
    rf"{_DAY}s|{_DAY} (?:mornings|afternoons|evenings|nights)|"
    rf"(?:in the|of a) (?:mornings?|evenings?|afternoons?)|at night|on weekends)\b"
)
_EVENT = re.compile(
    rf"\b(?:tomorrow|tonight|this (?:evening|afternoon|morning|weekend|{_DAY})|"
    rf"next (?:week|month|year|weekend|{_DAY}|{_MONTH})|(?:on|this|by|until) {_DAY}|"
    rf"(?:on|by|until|for|from) the {_ORDINAL}(?! (?:floor|time|row|door|grade|year|one))|"
    rf"{_ORDINAL} of|{_MONTH} (?:the )?(?:{_ORDINAL}|\d+)|"
    rf"(?:in|of|until|by) (?:{_MONTH}|may)|"
    rf"appointment|interview|booked|due (?:on|in|at)|flight|flies|fly to|wedding|"
    rf"birthday|anniversary|christening|funeral|surgery|operation|meeting|party|concert|"
    rf"tickets?|deadline|exam|trip|holiday|going (?:camping|away|on)|is coming|are coming|"
    rf"visiting)\b"
)
_BEINGS = frozenset(PEOPLE | PETS)
# "the household has a dog called biscuit", "two rabbits called salt and pepper".
_NAMED_BEING = re.compile(
    r"\b(?:has|have|got) (?:a|an|two|three|four|\d+) (?:[a-z]+ ){0,3}?([a-z]+) "
    r"(?:called|named)\b"
)


def kind_usetype(kind: MemoryKind) -> str:
    """The usetype a memory of ``kind`` is stored with (``memory:preference``)."""
    return USETYPE_PREFIX + kind


def usetype_kind(usetype: str | None) -> MemoryKind:
    """The kind a stored usetype says; a memory with none (kept before kinds) is a fact."""
    name = (usetype or "").removeprefix(USETYPE_PREFIX)
    for kind in KINDS:
        if name == kind:
            return kind
    return "fact"


def parse_kinds(raw: object) -> tuple[MemoryKind, ...] | None:
    """A list of kind names as given in config or a tool call, in :data:`KINDS` order;
    absent (None) is every kind. ValueError names what is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw or any(k not in KINDS for k in raw):
        raise ValueError(f"expected a non-empty list of {', '.join(KINDS)}; got {raw!r:.200}")
    return tuple(k for k in KINDS if k in raw)


def _about_a_being(text: str, claim: Claim | None) -> bool:
    """Whether the fact is about a person or a pet other than the user."""
    subject = claim.subject if claim is not None else None
    if subject is not None and subject.kind in ("person", "pet"):
        return True
    named = _NAMED_BEING.search(text)
    if named is not None and named.group(1).removesuffix("s") in _BEINGS | {
        word.split()[-1] for word in MULTI_WORD_PEOPLE
    }:
        return True
    # "The user's uncle used to be a fisherman": a being said first, whatever the verb.
    opening = re.match(r"(?:the user's |the |our |my )([a-z]+(?: [a-z]+)?)", text)
    if opening is None:
        return False
    first = opening.group(1).split()
    return first[0] in _BEINGS or " ".join(first) in MULTI_WORD_PEOPLE


def kind_of(draft: str, claim: Claim | None = None) -> MemoryKind:
    """The kind of the memory ``draft`` (its claim, when already read, saves a parse)."""
    text = " ".join(draft.lower().replace("’", "'").split())
    text = re.sub(r"^the user said:\s*", "", text).rstrip(".!? ")
    if _PREFERENCE.search(text):
        return "preference"
    if _ROUTINE.search(text):
        return "routine"
    if _EVENT.search(text):
        return "event"
    if _about_a_being(text, claim if claim is not None else read_claim(draft)):
        return "person"
    return "fact"
