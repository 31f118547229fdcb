"""What a recogniser writes before the point of an utterance: fillers, openers, requests
to remember. Pure.

Spoken words reach home as the recogniser wrote them: lower case, no punctuation, with
the "um", "so", "okay" and "remember this" a person puts ahead of what they mean. The
keep gate reads its opening cue after them (:mod:`home.memory.keep_gate`) and the
draft leaves them out of the memory (:mod:`home.memory.restate`): one reading for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from home.memory.fidelity import NUMBER_WORDS

# Sounds that are never words of the fact, wherever they stand.
_FILLER_TEXT = "um umm uh uhh uhm erm er ah eh hmm hm mm mhm"
FILLERS = frozenset(_FILLER_TEXT.split())
# Words that open a spoken sentence without belonging to it (only at its start: "like"
# and "right" are words of a fact elsewhere). "actually" opens a correction; what it
# corrects is read from the fact's slot (:mod:`home.memory.correction`), not this word.
_DISCOURSE_OPENERS = (
    "by the way", "you know", "i mean", "oh and", "and also", "so", "well", "okay", "ok",
    "yeah", "yes", "yep", "oh", "and", "hey", "hi", "right", "alright", "anyway", "also",
    "actually", "like", "listen", "look", "now", "no wait", "wait", "sorry", "oops",
)  # fmt: skip
# Requests to keep what follows: the utterance is a fact (the keep gate's cue), and the
# request itself is no part of it. Longest first, so "remember that" is read before
# "remember".
_REMEMBER_OPENERS = (
    "i want you to remember that", "i want you to remember", "i'd like you to remember that",
    "can you remember that", "could you remember that", "can you remember",
    "could you remember", "please remember that", "please remember", "please note that",
    "remember this", "remember that", "make a note that", "take a note that", "note that",
    "just so you know", "for the record", "don't forget that", "keep in mind that",
    "keep in mind", "fyi",
)  # fmt: skip
# A bare "remember" asks to keep whatever follows but "to": "remember my locker is 12" and
# "remember the bins go out on wednesdays" are facts, "remember to call mum" a reminder,
# and "don't forget your pe kit" is said to someone in the room.
_BARE_REMEMBER = r"(?:remember|don't\s+forget)[\s,:;]+(?!to\b|your?\b|you're\b)(?=\w)"
# Said anywhere, these two words carry nothing ("my car is you know the red one").
_ANYWHERE = re.compile(r"\byou know\b[\s,]*", re.IGNORECASE)
_PUNCTUATION = r"[\s,.;:!?\-–—]*"


def _alternation(phrases: tuple[str, ...]) -> str:
    ordered = sorted(phrases, key=len, reverse=True)
    return "|".join(re.escape(p).replace(r"\ ", r"\s+") for p in ordered)


_FILLER = re.compile(rf"^(?:{_alternation(tuple(FILLERS))})\b{_PUNCTUATION}", re.IGNORECASE)
_DISCOURSE = re.compile(rf"^(?:{_alternation(_DISCOURSE_OPENERS)})\b{_PUNCTUATION}", re.IGNORECASE)
_REMEMBER = re.compile(
    rf"^(?:(?:{_alternation(_REMEMBER_OPENERS)})\b{_PUNCTUATION}|{_BARE_REMEMBER})", re.IGNORECASE
)
_FILLER_ANYWHERE = re.compile(
    rf"(?<![\w'])(?:{_alternation(tuple(FILLERS))})(?![\w']){_PUNCTUATION}", re.IGNORECASE
)
_REPEATED = re.compile(r"\b([\w']+)(?:\s+\1\b)+", re.IGNORECASE)


def _unstuttered(match: re.Match[str]) -> str:
    """A word said twice in a row once ("my my wife"), but a number said twice stays: it
    is a value ("bay one one four", "pin 4 4 7 1")."""
    word = match.group(1)
    return match.group(0) if word.isdigit() or word.lower() in NUMBER_WORDS else word


@dataclass(frozen=True)
class Opening:
    """An utterance read past its opening: what is left, and whether it asked to be kept."""

    rest: str
    remember: bool


def read_opening(utterance: str) -> Opening:
    """Strip fillers, discourse openers and requests to remember from the start, in any
    order and any number ("okay um so remember this my ..."); say whether one asked to
    remember."""
    text = " ".join(utterance.split())
    remember = False
    while True:
        for pattern in (_FILLER, _REMEMBER, _DISCOURSE):
            match = pattern.match(text)
            if match is not None and match.end() > 0:
                remember = remember or pattern is _REMEMBER
                text = text[match.end() :]
                break
        else:
            return Opening(text, remember)


def without_fillers(text: str) -> str:
    """``text`` without filler sounds, "you know", and words said twice in a row."""
    text = _FILLER_ANYWHERE.sub("", text)
    text = _ANYWHERE.sub("", text)
    text = _REPEATED.sub(_unstuttered, text)
    return " ".join(text.split())
