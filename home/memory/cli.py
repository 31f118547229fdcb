"""``home memory calibrate AGENT``: the reflex's score distributions and a suggested threshold.

Registered onto the ``home memory`` group (JMFTS's) by :func:`register`. Exit codes: 0 a
report was made; 1 there is nothing to calibrate from yet; 2 bad usage or input (no
ledger for that agent, a malformed ledger).

``home memory judge TEXT...``: the keep gate's verdict on each utterance. Exit codes: 0
judged; 1 the gate (or the model given with ``--llm-url``) failed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from home.memory.calibrate import CATEGORIES, Calibration, collect, describe, plot
from home.memory.config import LEDGER_DIRNAME
from home.memory.extract import Extracted
from home.memory.judge import (
    EvaluatorModel,
    HomeEvaluator,
    Judged,
    home_evaluator,
    judge_utterances,
)
from home.memory.keep_gate import load_keep_gate
from home.memory.records import Ledger
from home.substrate.options import DataDir
from shared.cli import CommandApp, finish
from shared.errors import UsageError

DEFAULT_AGENT = "edge_asr_memory"
console = Console()


def ledger_path(home_dir: Path, agent: str) -> Path:
    """Where an agent node's reflex keeps its ledger under the home data directory."""
    return home_dir / "agents" / agent / LEDGER_DIRNAME / "searches.jsonl"


def calibrate(
    data_dir: DataDir,
    agent: Annotated[
        str, typer.Argument(help="The agent whose reflex to calibrate, e.g. edge_asr_memory.")
    ],
    ledger: Annotated[
        Path | None, typer.Option("--ledger", help="Read this ledger file instead.")
    ] = None,
    plot_path: Annotated[
        Path | None,
        typer.Option("--plot", help="Where to write the PNG (default: ./calibration-AGENT.png)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable output on stdout.")
    ] = False,
) -> None:
    """Read the reflex's recorded searches and suggest a recall threshold.

    Prints the score distributions of hits shown and used, shown and not used, and not shown,
    and the threshold that best separates used hits from the rest; draws them as a PNG.

    Example: home memory calibrate edge_asr_memory [--data-dir DIR]
    """
    source = ledger or ledger_path(data_dir, agent)
    if not source.exists():
        raise UsageError(f"no ledger for agent {agent!r} at {source}")
    calibration = collect(Ledger(source).read())
    image = None
    if calibration.searches:
        image = plot(calibration, plot_path or Path(f"calibration-{agent}.png"), agent)
    if as_json:
        print(json.dumps({**calibration.summary(), "plot": str(image) if image else None}))
    else:
        _print(calibration, agent, source, image)
    finish(ok=calibration.suggested is not None)


STATS = ("n", "min", "p10", "median", "p90", "max")


def _print(calibration: Calibration, agent: str, source: Path, image: Path | None) -> None:
    table = Table(title=f"memory reflex of {agent}: {calibration.searches} searches ({source})")
    for column in ("hits", *STATS):
        table.add_column(column, justify="left" if column == "hits" else "right")
    for category in CATEGORIES:
        row = describe(calibration.scores[category])
        table.add_row(
            category.replace("_", " "),
            *("-" if row[k] is None else f"{row[k]:.4g}" for k in STATS),
        )
    console.print(table)
    console.print(f"current threshold: {calibration.current}")
    if calibration.suggested is not None:
        console.print(
            f"suggested threshold: [bold]{calibration.suggested}[/bold] "
            f"(J = {calibration.separation}; {calibration.reason})"
        )
    else:
        console.print(f"no suggestion: {calibration.reason}")
    if image is not None:
        console.print(f"plot: {image}")


def judge(
    data_dir: DataDir,
    utterances: Annotated[
        list[str],
        typer.Argument(help="Utterances to judge, one argument each.", show_default=False),
    ],
    *,
    agent: Annotated[
        str, typer.Option("--agent", help="The agent whose reflex to run, as home runs it.")
    ] = DEFAULT_AGENT,
    llm_url: Annotated[
        str | None,
        typer.Option(
            "--llm-url",
            help="Judge as a home whose agents talk to this OpenAI-compatible model "
            "(`home up --llm-url`): that model names the facts, and each is checked "
            "against what was said. Without it, the home at --data-dir decides.",
        ),
    ] = None,
    llm_model: Annotated[
        str, typer.Option("--llm-model", help="The model name sent with --llm-url.")
    ] = "default",
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable output on stdout.")
    ] = False,
) -> None:
    """Say what the memory reflex would keep of each utterance, and as what memory.

    Runs the reflex's own path for the home at --data-dir (its agent's model and
    settings). With the embedded model: the keep gate (MiniLM embeddings against the
    shipped examples, a score >= 0 keeps) and, for a kept utterance, its draft: the
    user's own words in the third person ("um my dog is rex" -> "The user's dog is rex.").
    With a model behind --llm-url: the facts that model names, each checked against what
    was said. A memory with a word nobody said is refused, and the words are shown.

    Example: home memory judge "my dog is called Rex now" "what is the weather"
    """
    evaluator = (
        home_evaluator(data_dir, agent)
        if llm_url is None
        else HomeEvaluator("model", EvaluatorModel(llm_url, llm_model), "--llm-url")
    )
    judged = asyncio.run(_judge(utterances, evaluator))
    if as_json:
        print(json.dumps({**judged.to_dict(), "evaluator": evaluator.source}))
        return
    table = Table(title=f"keep gate ({judged.path} path; {evaluator.source})")
    for column in ("utterance", "decision", "score", "memory"):
        table.add_column(column, justify="right" if column == "score" else "left")
    for j in judged.judgements:
        memory = "" if j.memory is None else _memory_cell(j.memory)
        table.add_row(j.utterance, j.verdict.decision, f"{j.verdict.score:+.3f}", memory)
    console.print(table)
    if judged.path == "model":
        for m in judged.memories:
            console.print(f"- {_memory_cell(m)}")


def _memory_cell(memory: Extracted) -> str:
    if memory.faithful:
        return f"{escape(memory.memory)} [dim]({memory.path})[/dim]"
    return (
        f"[red]refused[/red] {escape(memory.memory)} [dim]({memory.path}; words nobody said: "
        f"{escape(', '.join(memory.invented))})[/dim]"
    )


async def _judge(utterances: list[str], evaluator: HomeEvaluator) -> Judged:
    gate = await asyncio.to_thread(load_keep_gate)
    async with httpx.AsyncClient() as http:
        return await judge_utterances(gate, utterances, evaluator, http)


def register(memory_app: CommandApp) -> None:
    """Add ``calibrate`` and ``judge`` to the ``home memory`` group."""
    memory_app.command("calibrate")(calibrate)
    memory_app.command("judge")(judge)
