"""The ``home`` command: root Typer app; each home component registers its own group."""

from __future__ import annotations

import typer

from home.substrate.cli import register as register_substrate

app = typer.Typer(
    name="home",
    help="Run and inspect the home side of tether: agents, memory (JMFTS), substrate.",
    no_args_is_help=True,
    add_completion=False,
)
register_substrate(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
