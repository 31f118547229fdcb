"""A verb's call: how often the desk's arguments are right, and what writing them costs.

On both halves of tests/home/intent/call_set.yaml (written before the calls code, by
another hand; the held-out half never tuned on): the desk's calls (its frame reading,
else the embedded model under the grammar: home/intent/frames.py, home/intent/calls.py)
against each alone: the frame reading with the whole turn where it knows no frame (what
a desk whose model takes no grammar does), and the model writing every call. A call is
right when each argument holds the words the set expects and at most two more; a
reminder when its time is the one the expected words say and its task holds them. Then
the time a call takes: the frame reading, and the model's call (p50, p99).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from home.intent.calls import PARAMETERS, CallWriter, VerbCall
from home.intent.frames import framed_call, unframed_call
from home.intent.step import Verb
from home.llm.model_file import EMBEDDED_MODEL_ID
from home.llm.server import LlamaServer, LlamaServerConfig
from home.reminders.errors import NoTimeSaid
from home.reminders.when import task_words, when_said
from shared.yaml_source import load_yaml
from tests.bench.report import Result, publish, quantile

CALL_SET = Path(__file__).parents[1] / "home" / "intent" / "call_set.yaml"
HALVES = {"tuning": "tuning", "held-out": "held_out"}
# Words a right argument may hold beyond the expected ones ("that", "please", ...).
SLACK_WORDS = 2
NOW = datetime(2026, 12, 2, 10, 0).astimezone()


@dataclass(frozen=True)
class CallCase:
    """One utterance of the call set: its verb, words, and what each argument must hold."""

    verb: Verb
    say: str
    expect: dict[str, str]


def read_cases(half: str) -> list[CallCase]:
    """The cases of one half of the call set."""
    raw: Any = load_yaml(CALL_SET)
    return [CallCase(Verb(c["verb"]), c["say"], dict(c["expect"])) for c in raw[half]]


def _due(words: str) -> datetime | None:
    """The time the set's expected words for it say ("ten minutes", "ten tomorrow")."""
    first = words.split(maxsplit=1)[0]
    framed = first in ("in", "at", "for", "on", "by", "tomorrow", "tonight", "next")
    lasts = any(unit in words for unit in ("second", "minute", "hour", " day", "week"))
    for said in (f"in {words}" if lasts else f"at {words}", words) if not framed else (words,):
        try:
            return when_said(said, NOW).due
        except NoTimeSaid:
            continue
    return None


def _holds(value: str, expected: str) -> bool:
    if not expected:
        return not value.strip()
    return expected in value and len(value.split()) <= len(expected.split()) + SLACK_WORDS


def right(case: CallCase, call: VerbCall | None) -> bool:
    """Whether ``call`` does what ``case`` asks."""
    if call is None or not call.complete:
        return False
    if case.verb is not Verb.REMIND:
        return all(_holds(call.arguments.get(k, ""), v) for k, v in case.expect.items())
    try:
        said = when_said(call["when"], NOW)
    except NoTimeSaid:
        return False
    task = task_words(call["text"]) if call["text"] else said.task
    expected = task_words(case.expect["text"]) if case.expect["text"] else ""
    return said.due == _due(case.expect["when"]) and _holds(task, expected)


Writer = Callable[[CallCase], Awaitable[VerbCall | None]]


async def _score(cases: list[CallCase], write: Writer) -> tuple[float, list[float]]:
    good, times = 0, []
    for case in cases:
        started = time.perf_counter()
        call = await write(case)
        times.append((time.perf_counter() - started) * 1000)
        good += right(case, call)
    return good / len(cases), times


@dataclass
class Writers:
    """The three ways a call is had: the desk's, the frame alone, the model alone."""

    model: CallWriter

    async def desk(self, case: CallCase) -> VerbCall | None:
        framed = framed_call(case.verb, case.say)
        return framed if framed is not None else await self.model.write(case.verb, case.say)

    async def frame(self, case: CallCase) -> VerbCall | None:
        return framed_call(case.verb, case.say) or unframed_call(case.verb, case.say)

    async def written(self, case: CallCase) -> VerbCall | None:
        return await self.model.write(case.verb, case.say)


async def _half(label: str, cases: list[CallCase], writers: Writers) -> list[Result]:
    """The rows of one half: calls the model may write, then reminders (read by frame)."""
    written = [c for c in cases if c.verb in PARAMETERS]
    reminders = [c for c in cases if c.verb is Verb.REMIND]
    ours, _ = await _score(written, writers.desk)
    peer, _ = await _score(written, writers.frame)
    alone, _ = await _score(written, writers.written)
    by_model = sum(framed_call(c.verb, c.say) is None for c in written) / len(written)
    remind, _ = await _score(reminders, writers.desk)
    labels: dict[str, str | float] = {"half": label, "verbs": "note, ask_operator, forget"}
    return [
        Result(f"{label}: note/ask/forget calls right", ours, "share", len(written),
               "frame alone", peer, "the desk: frame, else the model", labels),
        Result(f"{label}: ... when the model writes all", alone, "share", len(written),
               "frame alone", peer, "", labels),
        Result(f"{label}: turns in no known frame", by_model, "share", len(written),
               note="written by the model", labels=labels),
        Result(f"{label}: reminders right", remind, "share", len(reminders),
               note="time and task read by home/reminders/when.py",
               labels={"half": label, "verbs": "remind"}),
    ]  # fmt: skip


async def measure() -> list[Result]:
    """Every row, with the embedded model served as `home up` serves it."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as work:
        config = LlamaServerConfig(log_path=Path(work) / "llama.log")
        async with LlamaServer(config) as llm:
            writers = Writers(CallWriter(llm.url, EMBEDDED_MODEL_ID))
            try:
                for label, half in HALVES.items():
                    results += await _half(label, read_cases(half), writers)
                cases = [c for half in HALVES.values() for c in read_cases(half)]
                _, frame_ms = await _score(cases, writers.frame)
                _, model_ms = await _score([c for c in cases if c.verb in PARAMETERS],
                                           writers.written)  # fmt: skip
            finally:
                await writers.model.close()
    return [
        *results,
        Result("frame reading, p99", quantile(frame_ms, 0.99), "ms", len(frame_ms)),
        Result("model's call, p50", quantile(model_ms, 0.5), "ms", len(model_ms)),
        Result("model's call, p99", quantile(model_ms, 0.99), "ms", len(model_ms),
               note="on the turns in no known frame only"),
    ]  # fmt: skip


def main() -> None:
    """Run the benchmark and publish ``bench-results/verb_calls.json``."""
    publish("verb_calls", asyncio.run(measure()))


if __name__ == "__main__":
    main()
