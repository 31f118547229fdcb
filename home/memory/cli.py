"""``home memory calibrate AGENT``: the reflex's score distributions and a suggested threshold.

Registered onto the ``home memory`` group (JMFTS's) by :func:`register`. Exit codes: 0 a
report was made; 1 there is nothing to calibrate from yet; 2 bad usage or input (no
ledger for that agent, a malformed ledger).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from home.memory.calibrate import CATEGORIES, Calibration, collect, describe, plot
from home.memory.config import LEDGER_DIRNAME
from home.memory.errors import LedgerError
from home.memory.records import Ledger

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_HOME_DIR = Path.home() / ".local" / "share" / "tether"

console = Console()
err_console = Console(stderr=True)


def ledger_path(home_dir: Path, agent: str) -> Path:
    """Where an agent node's reflex keeps its ledger under the home data directory."""
    return home_dir / "agents" / agent / LEDGER_DIRNAME / "searches.jsonl"


def calibrate(
    agent: Annotated[
        str, typer.Argument(help="The agent whose reflex to calibrate, e.g. edge_asr_memory.")
    ],
    data_dir: Annotated[
        Path,
        typer.Option("--data-dir", help="The home data directory (agents/AGENT/... below it)."),
    ] = DEFAULT_HOME_DIR,
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

    Example: home memory calibrate edge_asr_memory --data-dir ~/.local/share/tether
    """
    source = ledger or ledger_path(data_dir, agent)
    if not source.exists():
        err_console.print(f"[red]error:[/red] no ledger for agent {agent!r} at {source}")
        raise typer.Exit(EXIT_USAGE)
    try:
        calibration = collect(Ledger(source).read())
    except LedgerError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    image = None
    if calibration.searches:
        image = plot(calibration, plot_path or Path(f"calibration-{agent}.png"), agent)
    if as_json:
        print(json.dumps({**calibration.summary(), "plot": str(image) if image else None}))
    else:
        _print(calibration, agent, source, image)
    if calibration.suggested is None:
        raise typer.Exit(EXIT_FAILURE)


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


def register(memory_app: typer.Typer) -> None:
    """Add ``calibrate`` to the ``home memory`` group."""
    memory_app.command("calibrate")(calibrate)
