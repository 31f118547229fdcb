"""What the substrate's commands share: the --json option, consoles, exit codes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from home.substrate import control
from home.substrate.client import HomeClient
from home.substrate.errors import ControlError, HomeNotRunning
from shared.exit_codes import ExitCode

T = TypeVar("T")

console = Console()
err = Console(stderr=True, soft_wrap=True)

AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def run_client(data_dir: Path, work: Callable[[HomeClient], Awaitable[T]]) -> T:
    """Run ``work`` against the home on ``data_dir``, turning failures into exit codes."""

    async def go() -> T:
        async with HomeClient(data_dir) as home:
            return await work(home)

    try:
        return asyncio.run(go())
    except HomeNotRunning as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        raise typer.Exit(ExitCode.FAILURE) from None
    except ControlError as exc:
        err.print(f"[red]error[/red] ({exc.code}): {escape(exc.message)}", highlight=False)
        usage = exc.code in (control.BAD_REQUEST, control.NOT_FOUND)
        raise typer.Exit(ExitCode.USAGE if usage else ExitCode.FAILURE) from None
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.OK) from None


def state_markup(state: str) -> str:
    """A state word, coloured for rich."""
    color = {
        "healthy": "green",
        "running": "green",
        "active": "green",
        "degraded": "red",
        "failed": "red",
        "unavailable": "red",
        "unhealthy": "red",
    }
    return f"[{color.get(state, 'yellow')}]{state}[/]"
