"""Answer quality of the embedded model per answer mode: parrot and unspeakable rates.

Every prompt of ``tests/home/llm/everyday_prompts.yaml`` goes through one agent
node (real τ, the shipped handset, SmolLM2-135M on llama.cpp) in each answer
mode; see :mod:`tests.support.answer_quality` for what is scored. Per mode:

- parrot rate and unspeakable rate of what reached the speaker (after the
  handset's speakable filter), beside the same rates of what the model wrote;
- self-repeat rate (an answer made mostly of the previous answer's words), silent
  rate (no speech at all), seconds per turn (p50, max), the run's wall time.

Each mode runs on its own model server (the history shown is the server's setting).

The shipped mode (``prose``) is the one the slow test holds to ≤ 5 % parrot and
0 unspeakable. ``BENCH_ANSWER_MODES=prose,forced-tool`` runs only the named modes.

The ``verbs`` row (:mod:`tests.support.verb_turns`) says verb turns to a whole `home up`
with its embedded defaults: the share carried out right end to end (goal ≥ 90 %), the
near-misses left to the model, and the intent step's time per turn (goal p99 ≤ 15 ms),
beside the model's own seconds per turn. ``BENCH_ANSWER_MODES=verbs`` runs it alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from home.agents.tau_command import DEFAULT_SYSTEM_PROMPT
from home.llm.endpoint import (
    EMBEDDED_SAMPLING,
    PROSE_MAX_TOKENS,
    AnswerMode,
    embedded_endpoint,
)
from home.llm.serve import DEFAULT_HISTORY_TURNS
from home.llm.server import LlamaServer, LlamaServerConfig
from shared.schema.catalog import load_node_catalog
from tests.bench.report import RESULTS_DIR, Result, publish, quantile
from tests.support.answer_quality import AnswerReport, AnswerSetup, measure, read_prompts
from tests.support.home_fixtures import REPO_ROOT
from tests.support.verb_turns import VerbReport
from tests.support.verb_turns import measure as measure_verbs

# The system prompt shipped before answers went to prose: it asked for the speak tool.
TOOL_SYSTEM_PROMPT = (
    "You are a voice assistant at home. The user speaks to you through a small "
    "device and hears your answers read aloud. Answer in one or two short, plain "
    "spoken sentences by calling the speak tool. No lists, tables, code or links."
)

WHOLE_SESSION = 10_000

SETUPS = (
    AnswerSetup(
        "prose",
        lambda url: embedded_endpoint(url, "speak", AnswerMode.PROSE),
        DEFAULT_SYSTEM_PROMPT,
        f"shipped: prose answers, {DEFAULT_HISTORY_TURNS} earlier turn shown",
    ),
    AnswerSetup(
        "forced-tool",
        lambda url: embedded_endpoint(url, "speak", AnswerMode.FORCED_TOOL),
        TOOL_SYSTEM_PROMPT,
        "speak forced under a JSON-schema grammar (shipped before, with the whole session)",
    ),
    AnswerSetup(
        "prose+whole-session",
        lambda url: embedded_endpoint(url, "speak", AnswerMode.PROSE),
        DEFAULT_SYSTEM_PROMPT,
        "the model sees every earlier turn",
        history_turns=WHOLE_SESSION,
    ),
    AnswerSetup(
        "prose+no-history",
        lambda url: embedded_endpoint(url, "speak", AnswerMode.PROSE),
        DEFAULT_SYSTEM_PROMPT,
        "the model sees the current turn only",
        history_turns=0,
    ),
    AnswerSetup(
        "prose+tool-prompt",
        lambda url: embedded_endpoint(url, "speak", AnswerMode.PROSE),
        TOOL_SYSTEM_PROMPT,
        "the system prompt that asked for the speak tool",
    ),
    AnswerSetup(
        "prose+temperature-0.7",
        lambda url: embedded_endpoint(
            url, "speak", AnswerMode.PROSE, replace(EMBEDDED_SAMPLING, temperature=0.7)
        ),
        DEFAULT_SYSTEM_PROMPT,
        "sampling: llama.cpp's server default is 0.8",
    ),
    AnswerSetup(
        "prose+repeat-penalty-1.1",
        lambda url: embedded_endpoint(
            url, "speak", AnswerMode.PROSE, replace(EMBEDDED_SAMPLING, repeat_penalty=1.1)
        ),
        DEFAULT_SYSTEM_PROMPT,
        "sampling: llama.cpp's default penalty on repeated tokens",
    ),
    AnswerSetup(
        f"prose+max-tokens-{PROSE_MAX_TOKENS}",
        lambda url: embedded_endpoint(
            url, "speak", AnswerMode.PROSE, prose_max_tokens=PROSE_MAX_TOKENS
        ),
        DEFAULT_SYSTEM_PROMPT,
        "a spoken answer capped tighter; cut answers spoken to their last whole sentence",
    ),
)


def _results(report: AnswerReport) -> list[Result]:
    n = len(report.answers)
    seconds = [a.seconds for a in report.answers]
    return [
        Result(
            metric=f"{report.mode}: parrot rate",
            value=100 * report.parrot_rate,
            unit="%",
            n=n,
            peer="as the model wrote it",
            peer_value=100 * report.written_parrot_rate,
            note="goal ≤ 5 % (shipped mode)",
        ),
        Result(
            metric=f"{report.mode}: unspeakable rate",
            value=100 * report.unspeakable_rate,
            unit="%",
            n=n,
            peer="as the model wrote it",
            peer_value=100 * report.written_unspeakable_rate,
            note="spoken text after the handset's filter; goal 0",
        ),
        Result(
            metric=f"{report.mode}: restate rate",
            value=100 * report.restate_rate,
            unit="%",
            n=n,
            note="the answer holds most of the prompt's words, in order",
        ),
        Result(
            metric=f"{report.mode}: self-repeat rate",
            value=100 * report.self_repeat_rate,
            unit="%",
            n=n,
            note="answers mostly the words of the previous answer",
        ),
        Result(
            metric=f"{report.mode}: silent rate",
            value=100 * report.silent_rate,
            unit="%",
            n=n,
            note="turns with no speech at all",
        ),
        Result(
            metric=f"{report.mode}: seconds per turn p50",
            value=statistics.median(seconds),
            unit="s",
            n=n,
            note=f"max {max(seconds):.1f} s; run {report.wall_s:.0f} s (one τ session)",
        ),
        Result(
            metric=f"{report.mode}: seconds per turn p95",
            value=statistics.quantiles(seconds, n=20)[-1],
            unit="s",
            n=n,
            note="the whole answer is written before it is spoken",
        ),
    ]


def _verb_results(report: VerbReport, model_p50_s: float | None) -> list[Result]:
    right, n = report.rate(chat=False)
    left, near = report.rate(chat=True)
    decide = report.decide_ms
    return [
        Result(
            metric="verbs: carried out right",
            value=100 * right,
            unit="%",
            n=n,
            note="through home up with the embedded defaults; goal ≥ 90 %",
        ),
        Result(
            metric="verbs: near-misses left to the model",
            value=100 * left,
            unit="%",
            n=near,
            note="'i forgot my keys', 'remind me what my sister's name is'",
        ),
        Result(
            metric="verbs: intent step per turn p99",
            value=quantile(decide, 0.99),
            unit="ms",
            n=len(decide),
            peer="the model's answer, p50" if model_p50_s is not None else None,
            peer_value=None if model_p50_s is None else 1000 * model_p50_s,
            note=f"p50 {quantile(decide, 0.5):.1f} ms; added to every turn; goal p99 ≤ 15 ms",
        ),
    ]


async def run() -> tuple[list[Result], list[AnswerReport]]:
    """Measure every selected answer mode on one embedded model server, then the verbs."""
    wanted = [m for m in os.environ.get("BENCH_ANSWER_MODES", "").split(",") if m]
    setups = [s for s in SETUPS if not wanted or s.name in wanted]
    spec = load_node_catalog(REPO_ROOT / "schemas" / "nodes.yaml")["agent.edge_asr"]
    prompts = read_prompts()
    results: list[Result] = []
    reports: list[AnswerReport] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n, setup in enumerate(setups):
            config = LlamaServerConfig(
                log_path=work / "llama.log", history_turns=setup.history_turns
            )
            async with LlamaServer(config) as llm:
                report = await measure(setup, llm.url, spec, work / f"mode{n}", prompts)
            reports.append(report)
            results += [replace(r, note=f"{r.note}; {setup.note}") for r in _results(report)]
        if not wanted or "verbs" in wanted:
            verbs = await measure_verbs(work / "verbs")
            model_p50 = (
                statistics.median(a.seconds for a in reports[0].answers) if reports else None
            )
            results += _verb_results(verbs, model_p50)
            RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            (RESULTS_DIR / "answers-verbs.json").write_text(
                json.dumps(verbs.rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
            )
    return results, reports


def main() -> None:
    """Run the benchmark, print the table, write bench-results/answers.json and the answers."""
    results, reports = asyncio.run(run())
    publish("answers", results)
    answers = {
        r.mode: [
            {"prompt": a.prompt, "written": a.written, "spoken": a.spoken,
             "parrot": a.parrot, "marks": a.marks, "seconds": round(a.seconds, 2)}
            for a in r.answers
        ]
        for r in reports
    }  # fmt: skip
    (RESULTS_DIR / "answers-texts.json").write_text(json.dumps(answers, indent=1))
