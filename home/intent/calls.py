"""A verb's call: its arguments, filled by the embedded model under a grammar.

When the intent step reads a turn as a verb (:mod:`home.intent.step`), the verb's
arguments are written by the model as a JSON object under a llama.cpp GBNF grammar
(:func:`call_grammar`) built from the verb's parameter schema (:data:`PARAMETERS`:
``journal_append``'s and ``delegate``'s own for ``note`` and ``ask_operator``), in
which every value is a run of the turn's own words. A 135M model asked to write a
request's arguments freely put words nobody said into them (the same lesson as the
memory reflex's, home/memory/extract.py); under this grammar it can only choose where
each value starts and stops, so what it writes is a call that parses and quotes the
speaker, or nothing usable at all.

The grammar is the model's constraint, not the effectors' guard: :func:`read_call` reads
whatever came back as if it were hostile (any size, any shape) and returns a
:class:`VerbCall` only for exactly the schema's object, every required value non-empty
and every value the turn's words. Anything else is no call, and the verb desk asks the
speaker instead (docs/architecture.md "The intent step").
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

import httpx

from home.intent.errors import IntentError
from home.intent.step import Verb, spoken_form
from home.tau_extensions.verbs import VERBS as TOOLS

#: Words of a turn a value may be drawn from: more than any request's arguments need,
#: and the grammar (one rule a word) stays small.
MAX_CALL_WORDS = 40
#: Characters of a model's reply read at most; a call of :data:`MAX_CALL_WORDS` words in
#: every value fits many times over.
MAX_CALL_CHARS = 4096
#: Tokens the model may write for a call: the longest values of :data:`MAX_CALL_WORDS`
#: words each, in every verb's schema.
CALL_MAX_TOKENS = 128
CALL_TIMEOUT_S = 30.0


class Words(enum.Enum):
    """Which runs of the turn's words a value may be."""

    #: Any run: "the laundry" in "cancel the laundry reminder".
    RUN = "run"
    #: A run to the end of the turn: what a request asks comes after its frame ("note
    #: that ..."), so only where it starts is the model's to choose.
    TAIL = "tail"


@dataclass(frozen=True)
class Parameter:
    """One argument of a verb: its name, what it holds, whether it may be empty, and which
    of the turn's words it may be."""

    name: str
    description: str
    required: bool
    words: Words = Words.RUN


def _from_tool(tool: str, words: Words) -> tuple[Parameter, ...]:
    """A τ tool's parameters (home/tau_extensions/verbs.py), in its schema's order."""
    schema = TOOLS[tool].parameters
    required = set(schema.get("required", ()))
    return tuple(
        Parameter(name, str(spec.get("description", name)), name in required, words)
        for name, spec in schema["properties"].items()
    )


#: The arguments of each verb whose call the model may write: those whose words follow
#: no frame the desk knows (home/intent/frames.py). ``note`` and ``ask_operator`` are the
#: ``journal_append`` and ``delegate`` tools' own; ``forget`` has no τ tool, since only
#: the desk carries it out. A reminder's time and task, and a cancel's choice, are read
#: from the whole turn (home/reminders/when.py), never written by the model.
PARAMETERS: dict[Verb, tuple[Parameter, ...]] = {
    Verb.NOTE: _from_tool("journal_append", Words.TAIL),
    Verb.ASK_OPERATOR: _from_tool("delegate", Words.TAIL),
    Verb.FORGET: (
        Parameter("about", "what to forget; empty for what was just said", required=False),
    ),
}


class NoCall(IntentError):
    """A turn no call can be written on: it has no words."""


@dataclass(frozen=True)
class VerbCall:
    """A valid call of ``verb``: each parameter's value, ``""`` for an empty optional one."""

    verb: Verb
    arguments: dict[str, str]

    def __getitem__(self, name: str) -> str:
        return self.arguments[name]

    @property
    def complete(self) -> bool:
        """Whether every required argument has words ("note that" alone has none)."""
        required = [p.name for p in PARAMETERS.get(self.verb, ()) if p.required]
        return all(self.arguments.get(name, "").strip() for name in required)


def call_words(utterance: str) -> list[str]:
    """The words of ``utterance`` a call's values are drawn from."""
    return spoken_form(utterance).split()[:MAX_CALL_WORDS]


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal (spoken words hold only ``[a-z0-9' ]``)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def call_grammar(verb: Verb, utterance: str) -> str:
    """The GBNF grammar of ``verb``'s call on ``utterance``: the schema's object with its
    keys in order, each value one its parameter's :class:`Words` allow (a required one at
    least one word). Word ``i`` is two rules: ``run<i>``, itself then optionally
    ``run<i+1>`` (a run stops after any word), and ``tail<i>``, itself then ``tail<i+1>``
    (a tail runs to the end): two rules a word, whatever the turn's length.
    :class:`NoCall` for a turn without words.
    """
    words = call_words(utterance)
    if not words:
        raise NoCall("an utterance without words has no call")
    fields, kinds = [], set()
    for i, parameter in enumerate(PARAMETERS[verb]):
        kind = parameter.words
        kinds.add(kind)
        key = _literal(("{" if i == 0 else ", ") + f'"{parameter.name}": "')
        value = kind.value if parameter.required else f"{kind.value}?"
        fields.append(f'{key} {value} "\\""')
    rules = [f'root ::= {" ".join(fields)} "}}"']
    last = len(words) - 1
    if Words.RUN in kinds:
        rules.append("run ::= " + " | ".join(f"run{i}" for i in range(len(words))))
        rules += [
            f"run{i} ::= {_literal(w)}" + (f' (" " run{i + 1})?' if i < last else "")
            for i, w in enumerate(words)
        ]
    if Words.TAIL in kinds:
        rules.append("tail ::= " + " | ".join(f"tail{i}" for i in range(len(words))))
        rules += [
            f"tail{i} ::= {_literal(w)}" + (f' " " tail{i + 1}' if i < last else "")
            for i, w in enumerate(words)
        ]
    return "\n".join(rules) + "\n"


def _is_run(value: str, words: list[str], *, tail: bool = False) -> bool:
    """Whether ``value`` is consecutive words of ``words`` (exactly, single-spaced), and
    with ``tail`` the last of them."""
    run = value.split(" ")
    if not value or any(not w for w in run):
        return False
    n = len(run)
    starts = [len(words) - n] if tail else range(len(words) - n + 1)
    return any(i >= 0 and words[i : i + n] == run for i in starts)


def read_call(verb: Verb, utterance: str, raw: str) -> VerbCall | None:
    """The call in the model's reply ``raw``, or None when it is not exactly ``verb``'s
    object: only its keys, every value a string of the turn's consecutive words, every
    required value non-empty."""
    parameters = PARAMETERS.get(verb)
    if parameters is None or len(raw) > MAX_CALL_CHARS:
        return None
    try:
        parsed: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict) or set(parsed) != {p.name for p in parameters}:
        return None
    words = call_words(utterance)
    arguments: dict[str, str] = {}
    for parameter in parameters:
        value = parsed[parameter.name]
        if not isinstance(value, str):
            return None
        if value == "" and not parameter.required:
            arguments[parameter.name] = ""
        elif _is_run(value, words, tail=parameter.words is Words.TAIL):
            arguments[parameter.name] = value
        else:
            return None
    return VerbCall(verb, arguments)


#: What the model is told: a call is the request's own words, sorted into the verb's
#: arguments. One worked example a verb shows it the shape of a good one.
SYSTEM = (
    "You sort the words of one spoken request into the arguments of a command. Copy "
    "the speaker's words; leave out the words that only make the request."
)
_EXAMPLES: dict[Verb, tuple[tuple[str, str], ...]] = {
    Verb.NOTE: (
        ("for the record the plumber is coming on friday",
         '{"text": "the plumber is coming on friday"}'),
        ("put it in the diary we used the last of the rice",
         '{"text": "we used the last of the rice"}'),
    ),
    Verb.ASK_OPERATOR: (
        ("have the operator look up what i said about the dentist",
         '{"text": "what i said about the dentist"}'),
        ("get the operator to check when the bins go out",
         '{"text": "check when the bins go out"}'),
    ),
    Verb.FORGET: (
        ("stop remembering that", '{"about": ""}'),
        ("i don't want you keeping my old phone number", '{"about": "my old phone number"}'),
    ),
}  # fmt: skip


def call_messages(verb: Verb, utterance: str) -> list[dict[str, str]]:
    """The chat that asks for ``verb``'s call on ``utterance``: what each argument holds,
    the verb's worked examples, then the turn's words."""
    described = "; ".join(
        f"{p.name}: {p.description}" + ("" if p.required else " (may be empty)")
        for p in PARAMETERS[verb]
    )
    messages = [{"role": "system", "content": f"{SYSTEM} Arguments: {described}."}]
    for said, call in _EXAMPLES[verb]:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": call}]
    messages.append({"role": "user", "content": " ".join(call_words(utterance))})
    return messages


class CallWriter:
    """Asks the embedded model (an OpenAI-compatible server that takes a GBNF ``grammar``,
    as llama-cpp-python's does) for a verb's call, and reads what it wrote."""

    def __init__(
        self, base_url: str, model: str, *, seed: int = 0, timeout_s: float = CALL_TIMEOUT_S
    ) -> None:
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.model = model
        self.seed = seed
        self._http = httpx.AsyncClient(timeout=timeout_s)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    async def write(self, verb: Verb, utterance: str) -> VerbCall | None:
        """``verb``'s call on ``utterance``, or None when the model wrote no valid one.
        A server that cannot be asked is an IntentError naming it."""
        try:
            grammar = call_grammar(verb, utterance)
        except NoCall:
            return None
        body = {
            "model": self.model,
            "messages": call_messages(verb, utterance),
            "grammar": grammar,
            "temperature": 0.0,
            "seed": self.seed,
            "max_tokens": CALL_MAX_TOKENS,
        }
        try:
            response = await self._http.post(self.url, json=body)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise IntentError(f"{self.url}: no call for {verb.value}: {exc!r:.200}") from exc
        return read_call(verb, utterance, content if isinstance(content, str) else "")
