"""The ``home`` command: the root Typer app; each part of home registers its own group."""

from __future__ import annotations

import typer

from home.agents.node import app as agent_app
from home.llm.cli import app as llm_app

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Mind at home: agents, memory, the language model and the event substrate.",
)
app.add_typer(agent_app, name="agent", help="Run one τ agent node.")
app.add_typer(llm_app, name="llm")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
