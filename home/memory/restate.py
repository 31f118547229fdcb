"""The memory text a kept utterance would be stored as, for ``home memory judge``.

Two ways, and the judge says which it used:

- **model**: the evaluator's own request (:data:`~home.memory.evaluator.UTTERANCE_SYSTEM`,
  :func:`~home.memory.evaluator.utterance_prompt`, :data:`~home.memory.evaluator.FACT_GBNF`,
  temperature 0) sent to an OpenAI-compatible server that takes a GBNF ``grammar`` (the
  embedded model's, ``home llm serve``): what the reflex would store.
- **draft**: no model; the utterance turned into the third person by rule ("my dog is
  called Rex" → "The user's dog is called Rex."). Deterministic, and a draft only: the
  model words facts its own way.

A draft that reads as a slot fact (``The user's <subject> <relation> <value>``, see
:mod:`home.memory.correction`) is what the reflex stores, model or not
(:func:`slot_fact`): measured in a running home, SmolLM2-135M restated "my dog is called
Rex now" as "The user's name, Rex, is being referred to." and "my dog is called Biscuit"
as "The user's dog was named Biscuit, and it belonged to them.", losing the slot a
correction needs; the draft keeps the user's own words.
"""

from __future__ import annotations

import re

import httpx

from home.memory.correction import read_slot
from home.memory.errors import RestatementError
from home.memory.evaluator import (
    FACT_GBNF,
    FACT_MAX_CHARS,
    UTTERANCE_MAX_TOKENS,
    UTTERANCE_SYSTEM,
    parse_facts,
    utterance_prompt,
)

DEFAULT_TIMEOUT_S = 60.0
# What a stored fact may hold: one line, no quotes or '&' (as the fact grammar allows).
_CLEAN = re.compile(r'The user[^\n"&]+')

# Words addressed to the assistant ahead of the fact: dropped from the draft.
_PREAMBLE = re.compile(
    r"^(?:remember that|remember|note that|keep in mind that|keep in mind|just so you know"
    r"|for the record|don't forget that)\b[\s,:]*",
    re.IGNORECASE,
)

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
    "mine": "the user's",
    "myself": "the user",
    "we're": "the user's household is",
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
_NOT_VERB_TEXT = """
is was has would will can can't could couldn't should must might may used had did
didn't doesn't the a an
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


def restate_draft(utterance: str) -> str:
    """The utterance in the third person, as one sentence: the rule-based draft."""
    text = _PREAMBLE.sub("", " ".join(utterance.strip().rstrip(".!?").split()))
    swapped = _SWAP.sub(lambda m: _PERSON_SWAP[m.group(1).lower()], text)
    swapped = _THE_USER_VERB.sub(_third_person, swapped)
    if "the user" not in swapped.lower():
        swapped = f"the user said: {swapped}"
    return swapped[:1].upper() + swapped[1:] + "."


def slot_fact(utterance: str) -> str | None:
    """The draft, when it reads as a slot fact of a fact line's length; else None."""
    draft = restate_draft(utterance)
    if len(draft) > FACT_MAX_CHARS + len("The user's ") or not _CLEAN.fullmatch(draft):
        return None
    return draft if read_slot(draft) is not None else None


async def restate_with_model(
    http: httpx.AsyncClient, base_url: str, model: str, utterance: str
) -> str:
    """The fact the evaluator's model writes for ``utterance`` (one ``The user's ...``)."""
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": UTTERANCE_SYSTEM},
            {"role": "user", "content": utterance_prompt(utterance)},
        ],
        "grammar": FACT_GBNF,
        "temperature": 0.0,
        "max_tokens": UTTERANCE_MAX_TOKENS,
    }
    url = f"{base_url.rstrip('/')}/chat/completions"
    try:
        response = await http.post(url, json=body, timeout=DEFAULT_TIMEOUT_S)
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
    except httpx.HTTPError as exc:
        raise RestatementError(f"POST {url}: {exc}") from exc
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise RestatementError(f"POST {url}: not a chat completion: {exc!r}") from exc
    facts = parse_facts(str(content))
    if not facts:
        raise RestatementError(f"POST {url}: no fact line in the answer {content!r:.120}")
    return facts[0]
