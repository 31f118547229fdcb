"""What the substrate's commands share: the --json option, consoles, the home client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from home.substrate.client import HomeClient
from shared.cli import interrupt_ends_cleanly

T = TypeVar("T")

console = Console()
err = Console(stderr=True, soft_wrap=True)

AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def run_client(data_dir: Path, work: Callable[[HomeClient], Awaitable[T]]) -> T:
    """Run ``work`` against the home on ``data_dir``; Ctrl-C ends it cleanly.

    Raises HomeNotRunning, or the ControlError of the code home answered with.
    """

    async def go() -> T:
        async with HomeClient(data_dir) as home:
            return await work(home)

    with interrupt_ends_cleanly():
        return asyncio.run(go())


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
