"""``home``: run the home side of tether and talk to a running one."""

from __future__ import annotations

import typer

from home.substrate.cli import register as register_substrate

app = typer.Typer(
    name="home",
    help="Run the home side of tether (NATS, substrate, agents, memory) and talk to it.",
    no_args_is_help=True,
    add_completion=False,
)
register_substrate(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
