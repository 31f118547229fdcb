"""The substrate's commands of ``home``: status, schema, events, trace."""

from __future__ import annotations

from collections.abc import Sequence

from home.substrate.cli.log import TraceAnnex, events, trace_command
from home.substrate.cli.schema import schema_app
from home.substrate.cli.status import status
from shared.cli import CommandApp


def register(app: CommandApp, *, trace_annexes: Sequence[TraceAnnex] = ()) -> None:
    """Add the substrate's commands to the root ``home`` app.

    ``home trace`` prints, below its table, what each of ``trace_annexes`` makes of the turn.
    """
    app.command("status")(status)
    app.add_typer(schema_app, name="schema")
    app.command("events")(events)
    app.command("trace")(trace_command(trace_annexes))
