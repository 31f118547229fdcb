"""What of a model's answer a speech synthesizer can read aloud, as one pure function.

Piper reads every character it is given: ``it&#39;s`` comes out as "it ampersand
hash thirty-nine", ``**`` and ``#`` as words, an emoji as its name or a
stutter. :func:`speakable_text` is applied to every text the handset speaks
(docs/architecture.md "Prose rules"), so nothing else reaches the board:

1. HTML entities decoded (twice escaped too), Unicode compatibility forms folded
   (NFKC), typographic quotes and dashes made plain;
2. code blocks, links, markup tags and Markdown marks removed, a Markdown link
   kept as its words;
3. every character that is not a letter, a digit, a space or spoken punctuation
   dropped (emoji, symbols, control and private-use characters);
4. runs of punctuation cut to one mark, runs of lone letters (a small model's
   ``s*n*m*r*h*t``) cut out;
5. at most :data:`MAX_SPEAKABLE_CHARS`, cut at a sentence end where there is one.

The result is empty when no word is left: the caller re-prompts or apologises.
"""

from __future__ import annotations

import html
import re
import unicodedata

# A few spoken sentences; the handset's speak tool allows 300 characters, prose 600.
MAX_SPEAKABLE_CHARS = 600

# Work on a bounded slice: an oversize answer is cut anyway, and the regexes stay linear.
_MAX_INPUT_CHARS = 8 * MAX_SPEAKABLE_CHARS

APOLOGY = "Sorry, I don't have a good answer to that."

_PLAIN = str.maketrans(
    {
        "‘": "'",
        "’": "'",
        "‚": "'",
        "‛": "'",
        "“": '"',
        "”": '"',
        "„": '"',
        "–": "-",
        "—": " - ",
        "‐": "-",
        "‑": "-",
        "…": "...",
        "\u00a0": " ",
    }
)
# Punctuation a speech synthesizer reads as a pause, or as the word it stands for.
_SPOKEN_PUNCTUATION = frozenset(".,!?;:'\"-()%&/$€£°")

_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"(?:https?://|www\.)\S*", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>")
_ENTITY_LEFT = re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_LINE_MARK = re.compile(r"^[ \t]*(?:#{1,6}|>+|[-*+•]|\d+[.)])[ \t]+", re.MULTILINE)
_ARITHMETIC = re.compile(r"(?<=\d)\s*([+=])\s*(?=\d)")
_SYMBOL_RUN = re.compile(r"[^\w\s]{2,}")
_SENTENCE_END_RUN = re.compile(r"([.!?])[.!?]*([\"')]?)")
_LONE_LETTERS = re.compile(r"(?:\b\w\b[\s.,;:-]*){3,}")
_SPACE_BEFORE_MARK = re.compile(r"\s+([.,!?;:)])")
_SPACES = re.compile(r"\s+")
_LEADING_JUNK = re.compile(r"^[\s.,!?;:)\-/&%]+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_WORD = re.compile(r"[^\W\d_]{2,}|\d")


def _decoded(text: str) -> str:
    # An entity escaped twice (``&amp;#39;``) needs a second pass.
    for _ in range(3):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return unicodedata.normalize("NFKC", text).translate(_PLAIN)


def _unmarked(text: str) -> str:
    text = _CODE_BLOCK.sub(" ", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _LINK.sub(" ", text)
    # Nested or broken markup: strip innermost tags until none is left.
    while (stripped := _TAG.sub(" ", text)) != text:
        text = stripped
    text = _LINE_MARK.sub("", text)
    return _ARITHMETIC.sub(lambda m: " plus " if m.group(1) == "+" else " equals ", text)


def _spoken_character(c: str) -> str:
    if c.isalnum() or c in _SPOKEN_PUNCTUATION:
        return c
    # Combining and invisible formatting characters vanish; anything else separates words.
    return "" if unicodedata.category(c) in ("Mn", "Me", "Cf") else " "


def _one_mark(run: re.Match[str]) -> str:
    """A run of punctuation as the one mark it stands for (a sentence end wins)."""
    marks = run.group()
    end = _SENTENCE_END_RUN.search(marks)
    if end is not None:
        return end.group(1) + end.group(2)
    return next((c for c in marks if c in ",;:"), " ")


def _capped(text: str) -> str:
    if len(text) <= MAX_SPEAKABLE_CHARS:
        return text
    head = text[:MAX_SPEAKABLE_CHARS]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] > MAX_SPEAKABLE_CHARS // 3:
        return head[: ends[-1]]
    return head[: MAX_SPEAKABLE_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:-") + "."


def speakable_text(text: str) -> str:
    """``text`` as a speech synthesizer should get it; empty when no word of it is left."""
    text = _unmarked(_decoded(text[:_MAX_INPUT_CHARS]))
    text = "".join(_spoken_character(c) for c in text)
    text = _LONE_LETTERS.sub(lambda m: m.group() if _keeps(m.group()) else " ", text)
    # Closing up spaces can make a new run of marks: repeat until nothing changes.
    while (tidy := _tidied(text)) != text:
        text = tidy
    if not _WORD.search(text):
        return ""
    return _capped(text)


def _tidied(text: str) -> str:
    # What reads as an entity after decoding names none ("&A;", or one the steps before
    # made: "&A/;" once the slash is gone): a synthesizer would spell it out.
    text = _ENTITY_LEFT.sub(" ", text)
    text = _SYMBOL_RUN.sub(_one_mark, text)
    text = _SPACE_BEFORE_MARK.sub(r"\1", _SPACES.sub(" ", text))
    return _LEADING_JUNK.sub("", text).strip()


def _keeps(run: str) -> bool:
    """Lone letters that are ordinary speech: "a", "I", and numbers ("1 2 3")."""
    return all(t.lower() in ("a", "i") or t.isdigit() for t in re.findall(r"\w", run))
