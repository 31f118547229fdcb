"""Whether the embedded model's answers are worth hearing: parrot and unspeakable rates.

Each prompt of ``tests/home/llm/everyday_prompts.yaml`` goes through the real
embedded path (llama.cpp serving SmolLM2-135M, one τ agent node with the
shipped handset, the event log's nats-server) as the edge sends an utterance;
what is scored is the text of the speak events, exactly what the board would
hand to Piper.

- **parrot** (the issue's measure): over half of the answer's words appear in
  the prompt, in order (the longest common subsequence of the two word lists);
- **restates**, reported beside it: the answer holds at least 3 words and over
  two thirds of the prompt's, in order. It catches "How long should I boil an
  egg? Here's a joke." (a parrot padded with filler) and also an answer that
  starts by restating the question ("The best way to learn a language is ...");
- **self-repeat**: over half of the answer's words are the previous answer's, in order;
- **unspeakable**: the spoken text holds an HTML entity, markup, a character
  Piper cannot say as a word (emoji, symbols, control characters), a run of
  symbols, or a link. Checked here independently of the handset's own filter.

An answer setup is the endpoint (answer mode, sampling) and the system prompt; the slow
test runs the shipped one, ``make bench NAME=answers`` compares them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import nats
import yaml

from home.agents.agent_node import AgentNode
from home.llm.endpoint import EMBEDDED_SAMPLING, ModelEndpoint
from shared.schema.catalog import NodeSpec
from tests.support.home_fixtures import REPO_ROOT, EdgeSide, event_log_server

PROMPT_SET = Path(__file__).parents[1] / "home" / "llm" / "everyday_prompts.yaml"
# The shipped sampling, seeded: a run answers as the last one did.
SEEDED = replace(EMBEDDED_SAMPLING, seed=20261203)

# How long one turn may take before it is scored as unanswered (2 shared cores,
# a re-prompt possible).
TURN_TIMEOUT_S = 90.0
RPC_TIMEOUT_S = 10.0

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_ENTITY = re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_LINK = re.compile(r"https?://|www\.", re.IGNORECASE)
# Punctuation a speech synthesizer reads as a pause or not at all.
_SPOKEN_PUNCTUATION = set(".,!?;:'\"-()%&/$€£°’‘“”–—…")
_SYMBOL_RUN = re.compile(r"[^\w\s]{3,}")
# A sentence end followed by closing quotes or brackets is ordinary prose.
_ORDINARY_RUN = re.compile(r"[.!?…]{1,3}[\"'’”)]{0,2}|[\"'‘“(]{1,2}")


def read_prompts(path: Path = PROMPT_SET) -> tuple[str, ...]:
    """The ``prompts:`` list of the prompt set file."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return tuple(str(p) for p in raw["prompts"])


def words(text: str) -> list[str]:
    """The words of ``text``, lower case, punctuation dropped."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text.replace("’", "'"))]


def _common_in_order(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two word lists."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def is_parrot(prompt: str, answer: str) -> bool:
    """Over half of the answer's words are the prompt's, in the prompt's order."""
    said = words(answer)
    return bool(said) and _common_in_order(said, words(prompt)) * 2 > len(said)


def restates(prompt: str, answer: str) -> bool:
    """The answer holds at least 3 and over two thirds of the prompt's words, in order."""
    asked = words(prompt)
    common = _common_in_order(words(answer), asked)
    return common >= 3 and common * 3 > 2 * len(asked)


def unspeakable_marks(text: str) -> list[str]:
    """What in ``text`` a speech synthesizer would read out wrongly; empty when none."""
    marks: list[str] = []
    marks += [f"entity {m}" for m in _ENTITY.findall(text)]
    marks += [f"markup {m}" for m in _TAG.findall(text)]
    marks += [f"link {m}" for m in _LINK.findall(text)]
    marks += [
        f"symbol run {m.group()!r}"
        for m in _SYMBOL_RUN.finditer(text)
        if not _ORDINARY_RUN.fullmatch(m.group())
    ]
    odd = sorted({c for c in text if not (c.isalnum() or c in " \n" or c in _SPOKEN_PUNCTUATION)})
    marks += [f"character {c!r} (U+{ord(c):04X})" for c in odd]
    return marks


@dataclass(frozen=True)
class AnswerSetup:
    """How the agent answers: its model endpoint (built from the server URL) and system prompt."""

    name: str
    endpoint: Callable[[str], ModelEndpoint]
    system_prompt: str | None = None
    note: str = ""
    # Turns before the current one the model server shows the model (None: its default).
    history_turns: int | None = None


@dataclass(frozen=True)
class Answer:
    """One prompt and what reached the speaker for it (None: nothing was spoken)."""

    prompt: str
    spoken: str | None
    seconds: float
    replies: tuple[str, ...] = ()
    # What the model wrote (prose, or the speak call's text) before the handset's filter.
    written: str = ""

    @property
    def parrot(self) -> bool:
        """The answer repeats the prompt."""
        return self.spoken is not None and is_parrot(self.prompt, self.spoken)

    @property
    def restates(self) -> bool:
        """The answer restates the prompt."""
        return self.spoken is not None and restates(self.prompt, self.spoken)

    @property
    def marks(self) -> list[str]:
        """What in the spoken text is unspeakable."""
        return [] if self.spoken is None else unspeakable_marks(self.spoken)

    @property
    def written_parrot(self) -> bool:
        """What the model wrote repeats the prompt."""
        return is_parrot(self.prompt, self.written)

    @property
    def written_marks(self) -> list[str]:
        """What in the model's own text is unspeakable."""
        return unspeakable_marks(self.written)


@dataclass
class AnswerReport:
    """Every answer of one mode over the prompt set, and the rates over them."""

    mode: str
    answers: list[Answer] = field(default_factory=list)
    wall_s: float = 0.0

    def _rate(self, hits: int) -> float:
        return hits / len(self.answers) if self.answers else 0.0

    @property
    def parrot_rate(self) -> float:
        """Share of prompts whose answer repeats the prompt."""
        return self._rate(sum(a.parrot for a in self.answers))

    @property
    def restate_rate(self) -> float:
        """Share of prompts whose answer restates the prompt."""
        return self._rate(sum(a.restates for a in self.answers))

    @property
    def unspeakable_rate(self) -> float:
        """Share of prompts whose spoken answer holds something unspeakable."""
        return self._rate(sum(bool(a.marks) for a in self.answers))

    @property
    def written_parrot_rate(self) -> float:
        """Share of prompts whose model-written answer repeats the prompt."""
        return self._rate(sum(a.written_parrot for a in self.answers))

    @property
    def written_unspeakable_rate(self) -> float:
        """Share of prompts whose model-written answer holds something unspeakable."""
        return self._rate(sum(bool(a.written_marks) for a in self.answers))

    @property
    def self_repeat_rate(self) -> float:
        """Share of prompts answered mostly with the previous answer's words, in order."""
        hits = sum(
            bool(now.spoken and before.spoken)
            and _common_in_order(words(now.spoken or ""), words(before.spoken or "")) * 2
            > len(words(now.spoken or ""))
            for before, now in zip(self.answers, self.answers[1:], strict=False)
        )
        return self._rate(hits)

    @property
    def silent_rate(self) -> float:
        """Share of prompts answered with no speech at all."""
        return self._rate(sum(a.spoken is None for a in self.answers))

    def worst(self) -> list[str]:
        """The parroted, unspeakable and silent answers, one line each (for messages)."""
        return [
            f"{a.prompt!r} -> {a.spoken!r} {a.marks or ''}{' parrot' if a.parrot else ''}"
            for a in self.answers
            if a.parrot or a.marks or a.spoken is None
        ]


async def _turn_over(edge: EdgeSide, node: AgentNode, binding: str, reprompts: int) -> None:
    """Return once the turn of ``binding`` has ended for good (its re-prompt included)."""
    while True:
        ended = [o for o in node.stats.outcomes if o.binding_id == binding]
        spoke = any(e.event.binding_id == binding for e in edge.on("speak"))
        if len(ended) >= 2 or (ended and spoke):
            return
        if ended:
            # A refusal's re-prompt is admitted off the bus, just after the turn ends.
            await asyncio.sleep(0.5)
            if node.stats.reprompts == reprompts:
                return
        await asyncio.sleep(0.05)


async def _answer_one(edge: EdgeSide, node: AgentNode, prompt: str) -> Answer:
    """Say ``prompt``; wait for the turn (and a re-prompt after a refusal) to end."""
    t0 = time.monotonic()
    reprompts = node.stats.reprompts
    said = await edge.say(prompt, received=lambda: node.stats.received)
    binding = said.binding_id
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(TURN_TIMEOUT_S):
            await _turn_over(edge, node, binding, reprompts)
    written = await _written(node)
    speaks = [e for e in edge.on("speak") if e.event.binding_id == binding]
    replies = [e for e in edge.on("reply") if e.event.binding_id == binding]
    return Answer(
        prompt=prompt,
        spoken=" ".join(str(e.event.payload.get("text")) for e in speaks) if speaks else None,
        seconds=time.monotonic() - t0,
        replies=tuple(str(e.event.payload.get("text")) for e in replies),
        written=written,
    )


async def _written(node: AgentNode) -> str:
    """What the model wrote in the last turn: prose blocks and speak calls' text, in order."""
    tau = node._tau.current  # read over τ's RPC from the session the node owns
    if tau is None:
        return ""
    try:
        async with asyncio.timeout(RPC_TIMEOUT_S):
            messages = (await tau.request("get_messages", {})).get("messages") or []
    except TimeoutError:
        return ""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    texts: list[str] = []
    for message in messages[last_user + 1 :]:
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "toolCall" and block.get("name") == "speak":
                texts.append(str((block.get("arguments") or {}).get("text", "")))
    return " ".join(t.strip() for t in texts if t.strip())


async def measure(
    mode: AnswerSetup,
    llm_url: str,
    spec: NodeSpec,
    work: Path,
    prompts: tuple[str, ...] | None = None,
) -> AnswerReport:
    """Send every prompt through one agent node answering in ``mode``; score what it says."""
    report = AnswerReport(mode.name)
    started = time.monotonic()
    async with event_log_server(work / "nats") as nats_url:
        nc = await nats.connect(nats_url)
        edge = EdgeSide(nc=nc, agent=str(spec.agent))
        await nc.subscribe("events.>", cb=edge.on_event)
        await nc.flush()
        try:
            async with AgentNode(
                spec,
                nats_url=nats_url,
                data_dir=work / "agent",
                model=mode.endpoint(llm_url),
                repo_root=REPO_ROOT,
                system_prompt=mode.system_prompt,
            ) as node:
                for prompt in prompts or read_prompts():
                    report.answers.append(await _answer_one(edge, node, prompt))
        finally:
            await nc.drain()
    report.wall_s = time.monotonic() - started
    return report
