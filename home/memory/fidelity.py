"""Whether a memory says only what was said: its content words against their sources. Pure.

A kept utterance is stored in the third person ("my sister Ingrid lives in Trondheim"
→ "The user's sister Ingrid lives in Trondheim."). The frame is ours: "the user", "the
user's", "household", "said", and the function words any sentence needs. Every other
word of a memory, a *content* word, must come from its sources: the utterance, and what
recall showed on that turn (the names the household already has in memory). A memory
with a content word from nowhere is refused (the reflex) or listed (``home memory
audit``): a memory that invents is recalled with confidence and spoken back as fact.

How words are compared, so that wording may change and content may not:

- by stem (Snowball English): "lives" was said as "live", "studies" as "study";
- negation is content: "doesn't" needs a "not" (or an "n't") in the sources;
- numbers as values: "forty three", "43" and "43rd" are one word.

Pronouns, articles, prepositions and auxiliaries are no content: "her" or "the" cannot
state a fact alone, and a capable model's paraphrase needs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

# The frame every memory is written in ("The user's household has ...", "The user said: ...").
_FRAME_TEXT = "user user's users household said"
FRAME_WORDS = frozenset(_FRAME_TEXT.split())
# Closed-class words: they carry no fact alone. Negations are not here (see the docstring).
_FUNCTION_TEXT = """
a an the this that these those there here it its itself
i me my mine myself you your yours yourself we us our ours ourselves
he him his himself she her hers herself they them their theirs themselves one ones
who whom whose which what when where why how whoever whatever
is am are was were be been being has have had having do does did done doing
will would shall should can could may might must ought
of in on at to for with by from as into onto about over under after before between
through during without within near up down out off than then so and or but if because
while also just too very really still now currently actually indeed anymore again
some any all both each every either other another such own same more most much many
s re ve ll d m t
"""
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
_NEGATED = re.compile(r"^([a-z]+)n't$")
_IRREGULAR_NEGATIONS = {"can't": "can", "won't": "will", "shan't": "shall", "ain't": "is"}
_ORDINAL_DIGITS = re.compile(r"^(\d+)(?:st|nd|rd|th)$")

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORDINAL_UNITS = [
    "zeroth",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
]
_ORDINAL_TENS = "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth"
NUMBER_WORDS: dict[str, int] = {
    **{w: i for i, w in enumerate(_UNITS)},
    **{w: 20 + 10 * i for i, w in enumerate(_TENS)},
    **{w: i for i, w in enumerate(_ORDINAL_UNITS)},
    **{w: 20 + 10 * i for i, w in enumerate(_ORDINAL_TENS.split())},
}
_SCALES = {"hundred": 100, "thousand": 1000}


@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


def _words(text: str) -> list[str]:
    """Lower-case words, contractions opened ("doesn't" → "does", "not"; "Ingrid's" → "ingrid")."""
    out: list[str] = []
    for word in _WORD.findall(text.lower().replace("’", "'")):
        match = _NEGATED.match(word)
        if word in _IRREGULAR_NEGATIONS:
            out.extend((_IRREGULAR_NEGATIONS[word], "not"))
        elif match is not None:
            out.extend((match.group(1), "not"))
        else:
            out.append(word.split("'", 1)[0])
    return out


def _numbers_joined(words: list[str]) -> list[str]:
    """Runs of number words as one number ("forty three" → "43"); ordinal digits bare."""
    out: list[str] = []
    total: int | None = None
    for said in [*words, ""]:
        digits = _ORDINAL_DIGITS.match(said)
        word = said if digits is None else digits.group(1)
        if word in NUMBER_WORDS:
            value = NUMBER_WORDS[word]
            # "forty three" adds; "three forty" (a time) is two numbers.
            if total is not None and total % 10 == 0 and total % 100 != 0 and value < 10:
                total += value
            else:
                _flush(out, total)
                total = value
        elif word in _SCALES and total is not None:
            total *= _SCALES[word]
        else:
            _flush(out, total)
            total = None
            if word:
                out.append(word)
    return out


def _flush(out: list[str], total: int | None) -> None:
    if total is not None:
        out.append(str(total))


def content_words(text: str) -> list[str]:
    """The words of ``text`` that can carry a fact, in order (numbers as digits)."""
    return [
        w for w in _numbers_joined(_words(text)) if w not in FUNCTION_WORDS and w not in FRAME_WORDS
    ]


def content_stems(text: str) -> set[str]:
    """The Snowball stems of ``text``'s content words."""
    return {stem(w) for w in content_words(text)}


def stem(word: str) -> str:
    """The word's Snowball English stem (digits are their own)."""
    return word if word.isdigit() else str(_stemmer().stemWord(word))


@dataclass(frozen=True)
class Fidelity:
    """A memory against its sources: the content words that came from none of them."""

    memory: str
    invented: tuple[str, ...]

    @property
    def faithful(self) -> bool:
        """Whether every content word of the memory was said (or recalled)."""
        return not self.invented


def check(memory: str, sources: Iterable[str]) -> Fidelity:
    """Which content words of ``memory`` are in none of ``sources`` (by stem)."""
    said = {stem(w) for source in sources for w in _numbers_joined(_words(source))}
    invented: list[str] = []
    for word in content_words(memory):
        if not any(stem(form) in said for form in _forms(word)) and word not in invented:
            invented.append(word)
    return Fidelity(memory, tuple(invented))


def _forms(word: str) -> tuple[str, ...]:
    """The word, and the word it is with a third-person or plural ending taken off: a stem
    does not always take it off ("bs" for "b"), and the draft puts one on any verb."""
    forms = [word]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    return tuple(forms)
