"""``edge``: the board's side of tether, and the keyboard that stands in for it."""

from __future__ import annotations

import typer

from edge.tui.cli import register as register_tui

app = typer.Typer(
    name="edge",
    help="The board's side of tether: talk to home from here (tui, say).",
    no_args_is_help=True,
    add_completion=False,
)
register_tui(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
