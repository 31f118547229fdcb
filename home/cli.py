"""The ``home`` command: root Typer app; each home component registers its own group."""

from __future__ import annotations

import typer

from home.jmfts.cli import jmfts_app, memory_app
from home.memory.cli import register as register_memory_commands

app = typer.Typer(
    name="home",
    help="Run and inspect the home side of tether: agents, memory (JMFTS), substrate.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(jmfts_app, name="jmfts")
register_memory_commands(memory_app)
app.add_typer(memory_app, name="memory")


def main() -> None:
    """Console-script entry point."""
    app()
