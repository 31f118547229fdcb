"""The substrate's commands of ``home``: up, status, schema, events, trace."""

from __future__ import annotations

import typer

from home.substrate.cli.log import events, trace_command
from home.substrate.cli.schema import schema_app
from home.substrate.cli.status import status
from home.substrate.cli.up import up


def register(app: typer.Typer) -> None:
    """Add the substrate's commands to the root ``home`` app."""
    app.command("up")(up)
    app.command("status")(status)
    app.add_typer(schema_app, name="schema")
    app.command("events")(events)
    app.command("trace")(trace_command)
