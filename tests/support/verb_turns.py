"""The verbs row of `make bench NAME=answers`: verb turns said to a real `home up` with
its embedded defaults, and whether each was carried out.

The turns are ``tests/bench/data/verb_turns.yaml``, said in order on one device
through home's NATS as the board's bridge half would. A verb turn is right when what
is spoken back holds every expected phrase (and, for a question to the operator, when
the answer that follows holds its own); a near-miss is right when the desk left it to
the model. Also timed: the intent step's decision per turn, the latency the verb desk
adds to every turn before τ.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import yaml

from home.intent.step import load_intent_step
from shared.event import Event
from shared.nats_confirm import confirm_subscriptions
from shared.subjects import speak_subject
from tests.home.test_home_turn import play_edge_turn
from tests.support.home_fixtures import REPO_ROOT
from tests.support.home_up import running_home

TURNS_FILE = REPO_ROOT / "tests" / "bench" / "data" / "verb_turns.yaml"
AGENT = "edge_asr_memory"
DEVICE = "bench"
# How the verb desk's sentences begin (home/agents/verb_desk.py): a near-miss answered
# with one of them was taken by the desk.
DESK_OPENINGS = (
    "noted:", "okay, i will remind you", "timer set", "when should i remind you",
    "you have", "cancelled", "done, i have forgotten", "i did not keep anything",
    "should i forget this", "i do not remember anything about", "i have asked the operator",
    "the operator cannot answer", "sorry, i could not do that", "that reminder has already",
    "the operator says", "i could not find out",
)  # fmt: skip


@dataclass(frozen=True)
class VerbTurn:
    """One line of the file."""

    say: str
    expect: tuple[str, ...] = ()
    answer: tuple[str, ...] = ()
    chat: bool = False
    fact: bool = False


@dataclass
class VerbReport:
    """Each scored turn: what was said back and whether it was right."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    decide_ms: list[float] = field(default_factory=list)

    def rate(self, *, chat: bool) -> tuple[float, int]:
        """Share of right turns among the verb turns (or the near-misses), and their count."""
        scored = [r for r in self.rows if r["chat"] is chat]
        return (sum(r["right"] for r in scored) / len(scored) if scored else 0.0), len(scored)


def read_turns(path: Path = TURNS_FILE) -> list[VerbTurn]:
    """The turns of the file, in order."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))["turns"]
    return [
        VerbTurn(
            say=t["say"],
            expect=tuple(t.get("expect", ())),
            answer=tuple(t.get("answer", ())),
            chat=bool(t.get("chat", False)),
            fact=bool(t.get("fact", False)),
        )
        for t in raw
    ]


def holds(text: str, phrases: tuple[str, ...]) -> bool:
    """Every phrase is in ``text``, case aside."""
    lowered = text.lower()
    return all(p.lower() in lowered for p in phrases)


async def _answer_after(speaks: Any, binding_id: str, within_s: float) -> str:
    """The operator's answer: the next speak of ``binding_id`` that is not the first."""
    async with asyncio.timeout(within_s):
        while True:
            said = Event.from_json((await speaks.next_msg(timeout=within_s)).data)
            text = str(said.payload.get("text", ""))
            if said.binding_id == binding_id and "asked the operator" not in text:
                return text


async def measure(work: Path) -> VerbReport:
    """Say every turn to one `home up`; score each."""
    turns = read_turns()
    report = VerbReport()
    await asyncio.to_thread(work.mkdir, parents=True, exist_ok=True)
    step = load_intent_step()
    for turn in turns:
        began = time.perf_counter()
        step.decide([turn.say])
        report.decide_ms.append(1000 * (time.perf_counter() - began))
    async with running_home(work / "home", None, apply=(AGENT,)) as home:
        nc = await nats.connect(home.nats_url)
        try:
            speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
            await confirm_subscriptions(nc)
            for turn in turns:
                _, spoken, sent = await play_edge_turn(home.nats_url, turn.say, 120, DEVICE)
                text = str(spoken.payload.get("text", ""))
                if turn.fact:
                    continue
                later = ""
                if turn.answer:
                    later = await _answer_after(speaks, sent.binding_id or "", 150)
                if turn.chat:
                    right = not text.lower().startswith(DESK_OPENINGS)
                else:
                    right = holds(text, turn.expect) and holds(later, turn.answer)
                report.rows.append(
                    {"say": turn.say, "spoken": text, "answer": later, "chat": turn.chat,
                     "right": right}
                )  # fmt: skip
        finally:
            await nc.close()
    return report
