"""``hil``: prove a board (or a virtual one) works end to end, with a report a person can read."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from hil.model import CaseResult, RunResult
from hil.report import write_reports
from hil.runner import HilError, Suite, run_suites
from hil.suites import SUITE_NAMES, build_suites
from hil.targets.base import TargetContext
from hil.targets.virtual import DEFAULT_PHRASES, VirtualBoard

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    name="hil",
    help="Hardware-in-the-loop runs: smoke, turn, linkdrop and soak suites against a board.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Run HIL suites and write JUnit XML, JSON and an HTML report."""


@app.command()
def run(  # noqa: PLR0917 - Typer maps each option to a parameter
    target: Annotated[
        str,
        typer.Option(
            help="'virtual': the real edge code on this machine, a PulseAudio null sink as its "
            "sound card, bridged to a fresh `home up`."
        ),
    ],
    suite: Annotated[
        str, typer.Option(help=f"Comma-separated suites: {', '.join(SUITE_NAMES)}.")
    ] = "smoke,turn",
    report: Annotated[
        Path, typer.Option(help="Where to write junit.xml, results.json and report.html.")
    ] = Path("hil-report"),
    llm_url: Annotated[
        str | None,
        typer.Option(help="An OpenAI-compatible model for home (default: the embedded model)."),
    ] = None,
    phrases: Annotated[
        str,
        typer.Option(
            help="Comma-separated Korean phrases to inject (the grammar of the test ASR)."
        ),
    ] = ",".join(DEFAULT_PHRASES),
    work_dir: Annotated[
        Path | None, typer.Option(help="Keep the run's files (home data, logs) here.")
    ] = None,
    soak_turns: Annotated[int, typer.Option(help="Turns in the soak suite.")] = 5,
    soak_minutes: Annotated[float, typer.Option(help="Minutes the soak suite spans.")] = 1.0,
) -> None:
    """Run suites against a target and write the reports.

    Exit status: 0 every case passed, 1 a case failed, 2 bad usage or a target
    that could not be brought up.

    Example:

        hil run --target virtual --suite smoke,turn,linkdrop --report out/
    """
    names = [s.strip() for s in suite.split(",") if s.strip()]
    chosen = tuple(p.strip() for p in phrases.split(",") if p.strip())
    try:
        suites = build_suites(names, chosen)
    except HilError as exc:
        err.print(f"[red]error[/red]: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    if target != "virtual":
        err.print(
            f"[red]error[/red]: target {target!r} is not supported by this version; "
            "use --target virtual"
        )
        raise typer.Exit(EXIT_USAGE)
    home_args = ("--llm-url", llm_url) if llm_url else ()
    try:
        result = asyncio.run(
            _run_virtual(
                suites,
                chosen,
                home_args,
                work_dir,
                soak_turns=soak_turns,
                soak_minutes=soak_minutes,
            )
        )
    except HilError as exc:
        err.print(f"[red]error[/red]: the target did not come up: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    paths = write_reports(result, report)
    counts = result.counts()
    verdict = "[green]PASS[/green]" if result.ok else "[red]FAIL[/red]"
    console.print(
        f"{verdict}: {counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors; "
        f"reports: {paths['html']}, {paths['junit']}, {paths['json']}"
    )
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


async def _run_virtual(
    suites: list[Suite[TargetContext]],
    phrases: tuple[str, ...],
    home_args: tuple[str, ...],
    work_dir: Path | None,
    *,
    soak_turns: int,
    soak_minutes: float,
) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="hil-") as tmp:
        root = work_dir or Path(tmp)
        board = VirtualBoard(root, phrases=phrases, home_args=home_args)
        async with board, board.watch() as home:
            ctx = TargetContext(board, home, root, soak_turns=soak_turns, soak_minutes=soak_minutes)
            result = await run_suites("virtual", suites, ctx, board.logs, _show)
        result.environment = {"target": "virtual", "work_dir": str(root), "phrases": phrases}
        return result


def _show(case: CaseResult) -> None:
    colour = {"pass": "green", "fail": "red", "error": "red", "skip": "yellow"}[case.verdict]
    console.print(
        f"[{colour}]{case.verdict:5}[/{colour}] {case.suite}/{case.name} "
        f"({case.duration_s:.1f} s){' — ' + case.reason if case.reason else ''}",
        highlight=False,
    )


def main() -> None:
    """Console-script entry point."""
    app()
