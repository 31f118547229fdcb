"""``home sessions list|show``: each device's conversation with each agent, and its turns.

``list`` reads the agents' books under ``DATA_DIR/agents`` (no home needs to run);
``show`` reads one conversation from where τ keeps it: its file, or JMFTS through
the running home's memory server as its admin (``--url`` and ``--token-file``
name another server). Exit codes: 0 done; 1 not found, or its store could not
give it; 2 bad usage, an ID that names more than one conversation, or a book or turn
ledger that cannot be read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from home.agents.errors import ConversationNotFound
from home.agents.sessions import (
    SESSIONS_FILE,
    TURNS_FILE,
    DeviceSession,
    TurnRecord,
    read_sessions,
    read_turns,
)
from home.agents.transcript import Turn, load_entries, turns_of
from home.jmfts.locate import locate_memory_server
from home.substrate.options import DataDir
from shared.cli import CommandApp
from shared.errors import UsageError

console = Console()

sessions_app = CommandApp(
    help="Conversations: one per (agent, device), kept across restarts. "
    "`list` shows them, `show ID` prints one turn by turn.",
    no_args_is_help=True,
    add_completion=False,
)

AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


@dataclass(frozen=True)
class Listed:
    """One conversation as ``list`` shows it: the book's entry and its ledger's summary."""

    session: DeviceSession
    turns: int
    last_turn: str | None

    def to_json(self) -> dict[str, Any]:
        """The row as ``list --json`` prints it."""
        return {**asdict(self.session), "turns": self.turns, "last_turn": self.last_turn}


def known_sessions(data_dir: Path) -> tuple[list[Listed], dict[str, list[TurnRecord]]]:
    """Every agent's conversations under ``data_dir``, and each one's ledger lines."""
    listed: list[Listed] = []
    ledgers: dict[str, list[TurnRecord]] = {}
    agents = data_dir / "agents"
    for run_dir in sorted(p for p in agents.iterdir() if p.is_dir()) if agents.is_dir() else []:
        sessions = read_sessions(run_dir / SESSIONS_FILE)
        for turn in read_turns(run_dir / TURNS_FILE):
            ledgers.setdefault(turn.session_id, []).append(turn)
        for session in sessions.values():
            own = ledgers.get(session.session_id, [])
            listed.append(Listed(session, len(own), own[-1].at if own else None))
    listed.sort(key=lambda row: (row.session.agent, row.session.device))
    return listed, ledgers


@sessions_app.command("list")
def list_sessions(
    data_dir: DataDir,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's.")] = None,
    device: Annotated[str | None, typer.Option("--device", help="Only this device's.")] = None,
    as_json: AsJson = False,
) -> None:
    """List the conversations kept under DATA_DIR: agent, device, store, turns, last turn."""
    rows = [
        row
        for row in known_sessions(data_dir)[0]
        if (agent is None or row.session.agent == agent)
        and (device is None or row.session.device == device)
    ]
    if as_json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
        return
    if not rows:
        console.print("no conversations yet")
        return
    # The first 12 characters name a conversation to `show` (`--json` has the whole id).
    table = Table("id", "agent", "device", "store", "turns", "last turn")
    for row in rows:
        s = row.session
        last = (row.last_turn or "")[:19].replace("T", " ")
        table.add_row(s.session_id[:12], s.agent, s.device, s.store, str(row.turns), last)
    console.print(table)


def find_session(rows: list[Listed], wanted: str) -> DeviceSession:
    """The conversation whose id is ``wanted`` or begins with it; ConversationNotFound if
    none is, UsageError if several are."""
    exact = [r.session for r in rows if r.session.session_id == wanted]
    matches = exact or [r.session for r in rows if r.session.session_id.startswith(wanted)]
    if not matches:
        raise ConversationNotFound(f"no conversation {wanted!r} (`home sessions list` shows them)")
    if len(matches) > 1:
        ids = ", ".join(s.session_id for s in matches)
        raise UsageError(f"{wanted!r} names more than one conversation: {ids}")
    return matches[0]


@sessions_app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="A conversation id, or its first characters.")],
    data_dir: DataDir,
    url: Annotated[
        str | None,
        typer.Option("--url", help="A JMFTS server to read from instead of the running home's."),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="Its token (default: the home's admin token)."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Print one conversation turn by turn: time, binding id, what was said, the answer."""
    rows, ledgers = known_sessions(data_dir)
    session = find_session(rows, session_id)
    jmfts_url, jmfts_token = None, None
    if session.store == "jmfts":
        server = locate_memory_server(data_dir, url, token_file)
        jmfts_url, jmfts_token = server.url, server.token_file
    entries = load_entries(session, jmfts_url, jmfts_token)
    turns = turns_of(entries, ledgers.get(session.session_id, []))
    if as_json:
        body = {"session": asdict(session), "turns": [t.to_json() for t in turns]}
        print(json.dumps(body, indent=2))
        return
    _print_turns(session, turns)


def _print_turns(session: DeviceSession, turns: list[Turn]) -> None:
    console.print(
        f"[bold]{session.agent}[/] with [bold]{session.device}[/]: {session.session_id} "
        f"({session.store}, {len(turns)} turns)",
        highlight=False,
    )
    for turn in turns:
        console.print(
            f"{turn.at}  {turn.binding_id or '-'}\n  > {escape(turn.said)}", highlight=False
        )
        for line in turn.answer:
            console.print(f"  < {escape(line)}", highlight=False)
