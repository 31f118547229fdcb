"""``home events`` and ``home trace``: the event log.

``home trace`` prints the turn's events, then what each :data:`TraceAnnex` the
home registers makes of them (home.memory: the memories the turn produced).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from home.substrate.cli.common import (
    AsJson,
    console,
    err,
    run_client,
)
from home.substrate.client import HomeClient
from home.substrate.config import EventLogConfig
from home.substrate.eventlog import EVENTS_SUBJECT, LoggedEvent, event_summary, read_log, trace
from home.substrate.options import DataDir
from shared.cli import finish


def events(
    data_dir: DataDir,
    subject: Annotated[
        str, typer.Option(help="Only subjects matching this (NATS wildcards).")
    ] = EVENTS_SUBJECT,
    binding: Annotated[str | None, typer.Option(help="Only events of this binding_id.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events.")] = (
        False
    ),
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print the event log (JetStream, every events.> subject), oldest first.

    Examples:

        home events --subject 'events.sensation.>' --follow
        home events --binding 3f2a... --json
    """

    async def work(home: HomeClient) -> None:
        async for logged in read_log(
            home.nc, EventLogConfig().stream, subject=subject, binding_id=binding, follow=follow
        ):
            if as_json:
                print(json.dumps(logged.to_dict(), ensure_ascii=False), flush=True)
            else:
                console.print(
                    f"{logged.seq:>6} {logged.time.strftime('%H:%M:%S.%f')[:-3]} "
                    f"[cyan]{logged.subject}[/] {escape(event_summary(logged))}",
                    highlight=False,
                    soft_wrap=True,
                )

    run_client(data_dir, work)


TraceAnnex = Callable[[str, Sequence[LoggedEvent]], None]
"""Prints, below the table of ``home trace``, what one part of home makes of a turn's events."""


def trace_command(annexes: Sequence[TraceAnnex] = ()) -> Callable[..., None]:
    """The ``home trace`` command, ending its table with ``annexes``."""

    def trace_turn(
        binding_id: Annotated[str, typer.Argument(help="The binding_id of one turn.")],
        data_dir: DataDir,
        as_json: AsJson = False,
    ) -> None:
        """One turn, in order, across every subject it touched, with the time between lines,
        then the memories the turn produced (from its memorize reports).

        Exit status 1 when the log holds no event of that binding_id.
        """
        found: list[LoggedEvent] = run_client(
            data_dir, lambda home: trace(home.nc, EventLogConfig().stream, binding_id)
        )
        if as_json:
            print(json.dumps([item.to_dict() for item in found], indent=2, ensure_ascii=False))
        else:
            _print_trace(binding_id, found, annexes)
        finish(ok=bool(found))

    return trace_turn


def _print_trace(binding_id: str, found: list[LoggedEvent], annexes: Sequence[TraceAnnex]) -> None:
    if not found:
        err.print(f"no event of binding {binding_id} in the event log")
        return
    table = Table(title=f"trace {binding_id}")
    table.add_column("+ms", justify="right")
    table.add_column("Δms", justify="right")
    table.add_column("subject", overflow="fold")
    table.add_column("event", overflow="fold")
    table.add_column("hops", overflow="fold")
    first: datetime = found[0].time
    previous = first
    for item in found:
        since = (item.time - first).total_seconds() * 1000
        delta = (item.time - previous).total_seconds() * 1000
        hops = ", ".join(item.event.hops) if item.event is not None else ""
        table.add_row(
            f"{since:.1f}", f"{delta:.1f}", item.subject, escape(event_summary(item)), hops
        )
        previous = item.time
    console.print(table)
    for annex in annexes:
        annex(binding_id, found)
