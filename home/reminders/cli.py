"""``home reminders list`` and ``home reminders cancel ID``: what waits for its time.

Read from each agent's reminders stream on the running home (as its admin bus user).
Exit codes: 0 done; the wrapper's (shared/cli.py) when no home runs on the data dir,
or when no pending reminder has the id given to ``cancel``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError
from rich.markup import escape
from rich.table import Table

from home.reminders.book import Reminder, ReminderBook
from home.reminders.errors import ReminderError
from home.substrate.cli.common import AsJson, console, run_client
from home.substrate.client import HomeClient
from home.substrate.options import DataDir
from shared.cli import CommandApp
from shared.subjects import REMINDERS_STREAM_PREFIX

reminders_app = CommandApp(
    help="Reminders and timers set by voice ('remind me in ten minutes to check the oven'). "
    "nats-server keeps each as a scheduled message and fires it at its time; the agent "
    "then says it on the device that asked.",
    no_args_is_help=True,
    add_completion=False,
)

AgentOption = Annotated[
    str | None, typer.Option("--agent", help="Only this agent's reminders [default: every agent].")
]


async def _books(home: HomeClient, agent: str | None) -> list[ReminderBook]:
    js = home.nc.jetstream()
    try:
        names = await js.streams_info()
    except NatsError as exc:
        raise ReminderError(f"cannot list the reminders streams: {exc!r}") from exc
    agents = sorted(
        s.config.name.removeprefix(REMINDERS_STREAM_PREFIX)
        for s in names
        if s.config.name and s.config.name.startswith(REMINDERS_STREAM_PREFIX)
    )
    return [ReminderBook(home.nc, a) for a in agents if agent is None or a == agent]


async def _pending(home: HomeClient, agent: str | None) -> tuple[list[Reminder], list[str]]:
    found: list[Reminder] = []
    unreadable: list[str] = []
    for book in await _books(home, agent):
        try:
            reminders, bad = await book.read_pending()
        except NotFoundError:
            continue
        found += reminders
        unreadable += bad
    found.sort(key=lambda r: r.due)
    return found, unreadable


def _row(reminder: Reminder, now: datetime) -> dict[str, object]:
    return {
        **reminder.to_payload(),
        "in_s": round((reminder.due - now).total_seconds()),
        "says": reminder.spoken(),
    }


@reminders_app.command("list")
def list_reminders(data_dir: DataDir, agent: AgentOption = None, as_json: AsJson = False) -> None:
    """List the reminders and timers waiting for their time, soonest first.

    Example: home reminders list --json
    """
    found, unreadable = run_client(data_dir, lambda home: _pending(home, agent))
    now = datetime.now().astimezone()
    for problem in unreadable:
        console.print(f"[yellow]unreadable reminder[/] {escape(problem)}", highlight=False)
    if as_json:
        print(json.dumps({"reminders": [_row(r, now) for r in found], "unreadable": unreadable}))
        return
    if not found:
        console.print("no reminders waiting")
        return
    table = Table(title="reminders")
    for column in ("id", "agent", "device", "due", "says"):
        table.add_column(column)
    for r in found:
        due = r.due.astimezone(now.tzinfo).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(r.id, r.agent, r.device, due, escape(r.spoken()))
    console.print(table)


@reminders_app.command("cancel")
def cancel(
    data_dir: DataDir,
    reminder_id: Annotated[
        str, typer.Argument(help="The reminder's id, or its first characters (see list).")
    ],
    agent: AgentOption = None,
    as_json: AsJson = False,
) -> None:
    """Cancel a reminder before its time: it is never said.

    Example: home reminders cancel 3f2a
    """
    if not reminder_id.strip():
        raise ReminderError("give the reminder's id (home reminders list shows them)")

    async def work(home: HomeClient) -> list[Reminder]:
        done: list[Reminder] = []
        for book in await _books(home, agent):
            done += await book.cancel(reminder_id.strip())
        return done

    cancelled = run_client(data_dir, work)
    if not cancelled:
        raise ReminderError(f"no pending reminder has an id starting {reminder_id!r}")
    if as_json:
        print(json.dumps({"cancelled": [r.to_payload() for r in cancelled]}))
        return
    for r in cancelled:
        console.print(f"cancelled {r.id} ({escape(r.spoken())}, {r.agent} on {r.device})")
