"""The prose rules, as pure functions over one assistant message.

The rules (docs/architecture.md "Prose rules"):

- text in a turn that also called a tool → a status line (reply rail);
- text in a turn that called nothing → the answer: spoken if speakable, else
  sent to the reply rail with ``spoken: false`` and the reason;
- no text and no tool → silence, a valid turn.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

# Longer than this is a document, not something to read aloud.
MAX_SPOKEN_CHARS = 600

_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$", re.MULTILINE)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
_URL = re.compile(r"https?://\S+")
# A sentence's end: its mark and any closing quotes or brackets, then a space or the end.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")
# A clause's end: a comma, semicolon or colon the stream has gone past (a space follows).
_CLAUSE_END = re.compile(r"[,;:](?=\s)")

# Words a period follows without ending the sentence ("Dr. Smith").
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "vs", "jr", "sr", "prof", "e.g", "i.e"})

# τ's stop reason of a message the output cap ended.
TRUNCATED = "length"


class ProseKind(enum.Enum):
    """What one assistant message's text is, by the shape of its turn."""

    SILENCE = "silence"
    STATUS = "status"
    ANSWER = "answer"


@dataclass(frozen=True)
class Prose:
    """The text of one assistant message and what it is."""

    kind: ProseKind
    text: str


def _blocks(message: dict[str, Any]) -> list[Any]:
    blocks = message.get("content") or []
    return [{"type": "text", "text": blocks}] if isinstance(blocks, str) else list(blocks)


def message_text(message: dict[str, Any]) -> str:
    """The text of an assistant message as written, spaces included (a stream's so far)."""
    return "".join(
        str(b.get("text", ""))
        for b in _blocks(message)
        if isinstance(b, dict) and b.get("type") == "text"
    )


def assistant_prose(message: dict[str, Any]) -> Prose:
    """Classify an assistant message (τ's serialized shape: content blocks)."""
    text = message_text(message).strip()
    called_tool = any(isinstance(b, dict) and b.get("type") == "toolCall" for b in _blocks(message))
    if not text:
        return Prose(ProseKind.SILENCE, "")
    return Prose(ProseKind.STATUS if called_tool else ProseKind.ANSWER, text)


def whole_sentences(text: str) -> str:
    """``text`` up to the end of its last whole sentence; all of it when it has none.

    An answer the token cap cut off ends mid-sentence; reading the fragment aloud
    would end the answer mid-thought.
    """
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]].rstrip() if ends else text


def first_sentence(text: str, clause_words: int = 0) -> str | None:
    """The first whole sentence of an answer still being written, or None while it has none.

    A sentence counts once the stream has gone past its end mark (``3.`` may yet
    become ``3.5``). An answer that opens with anything but a spoken sentence (a
    heading, a list, a code block) has none: it is spoken whole, or refused, once
    it ends (docs/architecture.md "Prose rules"). With ``clause_words``, a first
    clause of at least that many words (up to a comma, semicolon or colon the
    stream has gone past) counts before its sentence ends: the board can say it
    while the model writes the rest.
    """
    text = text.lstrip()
    for end in _SENTENCE_END.finditer(text):
        if end.end() >= len(text):
            break
        sentence = text[: end.end()]
        words = sentence.split()
        if words and words[-1].rstrip(".").lower() in _ABBREVIATIONS:
            continue
        return sentence if _spoken_opening(sentence) else None
    clause = _first_clause(text, clause_words) if clause_words > 0 else None
    return clause if clause is not None and _spoken_opening(clause) else None


def _first_clause(text: str, min_words: int) -> str | None:
    for end in _CLAUSE_END.finditer(text):
        if _SENTENCE_END.search(text, 0, end.start()) is not None:
            return None  # a sentence ends before it: that sentence is the first part
        head = text[: end.end()]
        if len(head.split()) >= min_words:
            return head
    return None


def _spoken_opening(part: str) -> bool:
    return "\n" not in part and "```" not in part and _URL.search(part) is None


def unspeakable_reason(text: str) -> str | None:
    """Why ``text`` cannot be read aloud as it stands, or None when it can."""
    checks = (
        ("```" in text, "it contains a code block"),
        (len(_TABLE_ROW.findall(text)) >= 2, "it contains a table"),
        (len(_LIST_ITEM.findall(text)) >= 3, "it is a list"),
        (_URL.search(text) is not None, "it contains a link"),
        (
            len(text) > MAX_SPOKEN_CHARS,
            f"it is {len(text)} characters long (at most {MAX_SPOKEN_CHARS} are spoken)",
        ),
        (sum(c.isalpha() for c in text) < len(text) / 2, "it is mostly symbols, not words"),
    )
    return next((reason for found, reason in checks if found), None)


def rewrite_request(reason: str) -> str:
    """The follow-up prompt the node sends once after a refusal to speak."""
    return (
        f"Your last answer could not be read aloud because {reason}. "
        "Say the same thing again in one or two plain spoken sentences, "
        "and give it to the speak tool."
    )
