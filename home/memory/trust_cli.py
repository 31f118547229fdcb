"""``home memory forget|show|due|audit``: retract a memory, show where it came from, list
what fades, list what was never said.

Registered onto the ``home memory`` group by :func:`register`. Each talks to the running
home's memory server as its admin, found through ``--data-dir`` as every ``home memory``
command does (``--url`` and ``--token-file`` name another server,
:mod:`home.jmfts.locate`). Exit codes: 0 done; 1 JMFTS refused or failed (not found,
unreachable, no home running); 2 bad usage or input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from home.jmfts.cli import AsJson, TokenFile, Url
from home.jmfts.client import SyncJmftsClient
from home.jmfts.locate import locate_memory_server
from home.memory.audit import AuditedMemory
from home.memory.audit import audit as run_audit
from home.memory.config import DEFAULT_INITIAL_STABILITY_DAYS, LEDGER_DIRNAME
from home.memory.due import DEFAULT_HORIZON_DAYS, due_memories, written_memories
from home.memory.forget import forget as forget_memory
from home.memory.forget import restore as restore_memory
from home.memory.fsrs import ReviewBook
from home.memory.origin import memory_origin
from home.memory.provenance import Provenance
from home.substrate.options import DataDir
from shared.cli import CommandApp, finish

console = Console()

MemoryId = Annotated[int, typer.Argument(help="The memory's document id.", min=1)]


@contextmanager
def _client(data_dir: Path, url: str | None, token_file: Path | None) -> Iterator[SyncJmftsClient]:
    """A client of the home's memory server (or the one named); HomeNotRunning if there is
    none to find."""
    server = locate_memory_server(data_dir, url, token_file)
    with SyncJmftsClient.from_token_file(server.url, server.token_file) as client:
        yield client


def forget(
    data_dir: DataDir,
    memory_id: MemoryId,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Stop recalling one memory: retracted in a workspace (still found --as-of before), else
    deleted.

    Example: home memory forget 42
    """
    with _client(data_dir, url, token_file) as client:
        done = forget_memory(client, memory_id)
    if as_json:
        print(json.dumps(done.to_dict()))
    elif done.retraction_id is not None:
        console.print(f"#{done.id} retracted by #{done.retraction_id}")
    else:
        console.print(f"#{done.id} deleted")


def restore(
    data_dir: DataDir,
    memory_id: MemoryId,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Undo a forget (by hand or by voice): the memory is written again, as a new record
    that replaces its retraction, and is recalled from now on.

    Example: home memory restore 42
    """
    with _client(data_dir, url, token_file) as client:
        done = restore_memory(client, memory_id)
    if as_json:
        print(json.dumps(done.to_dict()))
    else:
        console.print(
            f"#{done.id} restored as #{done.restored_id} (undoing retraction #{done.retraction_id})"
        )


def show(
    data_dir: DataDir,
    memory_id: MemoryId,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Print one memory and where it came from: agent, schema, turn (binding id), evaluation.

    Example: home memory show 42
    """
    with _client(data_dir, url, token_file) as client:
        origin = memory_origin(client, memory_id)
    if as_json:
        print(json.dumps(origin.to_dict()))
        return
    for line in origin.lines():
        console.print(line, highlight=False, soft_wrap=True)


def _current_view(client: SyncJmftsClient, root: str) -> list[dict[str, Any]]:
    """The current (not superseded, not retracted) records under ``root``, oldest first."""
    doc = client.resolve(root)
    view: list[dict[str, Any]] = client.request("GET", f"/workspace/{doc.id}")["current"]
    return view


def due(
    data_dir: DataDir,
    agent: Annotated[str, typer.Argument(help="The agent whose memories to check.")],
    *,
    within_days: Annotated[
        float, typer.Option("--within", help="Horizon in days.", min=0.0)
    ] = DEFAULT_HORIZON_DAYS,
    root: Annotated[
        str | None, typer.Option(help="The decaying root [default: workspace/AGENT].")
    ] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """List the memories due for review within --within days, the most sunk first.

    Decay never hides a memory: its FSRS retrievability R only weighs its rank among a
    recall's candidates (rank weight = 0.7 + 0.3 R). A memory is due when R falls to 0.9;
    recalled and used, or said again, its clock starts over and it sinks slower.

    Example: home memory due edge_asr_memory --within 7 --json
    """
    state = data_dir / "agents" / agent / LEDGER_DIRNAME
    book = ReviewBook(state / "reviews.json", DEFAULT_INITIAL_STABILITY_DAYS)
    with _client(data_dir, url, token_file) as client:
        memories = written_memories(_current_view(client, root or f"workspace/{agent}"))
    found = due_memories(memories, book, now=datetime.now(UTC), horizon=timedelta(days=within_days))
    if as_json:
        summary = {"within_days": within_days, "checked": len(memories)}
        print(json.dumps({**summary, "due": [d.to_dict() for d in found]}))
        return
    table = Table(title=f"{agent}: {len(found)} of {len(memories)} memories due for review "
                        f"within {within_days:g} day(s)")  # fmt: skip
    for column in ("id", "days left", "R now", "rank weight", "memory"):
        table.add_column(column)
    for d in found:
        table.add_row(str(d.id), f"{d.days_left:.2f}", f"{d.retrievability:.3f}",
                      f"{d.rank_weight:.3f}", d.content[:70])  # fmt: skip
    console.print(table)


TurnWords = Callable[[Path, str], Mapping[str, str]]
"""An agent's turn ledger under a data dir, as binding id → the words of that turn; a
malformed ledger raises an :class:`~shared.errors.InputError` naming its line."""


def audit_command(turn_words: TurnWords) -> Callable[..., None]:
    """The ``home memory audit`` command, reading older memories' turns with ``turn_words``
    (the agents' ledger: handed in by the composition root, so memory imports no agents)."""

    def audit(
        data_dir: DataDir,
        agent: Annotated[
            str, typer.Option("--agent", help="The agent whose memories to audit.")
        ] = "edge_asr_memory",
        *,
        retract: Annotated[
            bool,
            typer.Option(
                "--retract",
                help="Retract each memory that fails, with a record of why (still found --as-of "
                "before).",
            ),
        ] = False,
        root: Annotated[
            str | None, typer.Option(help="The memory root (default: workspace/AGENT).")
        ] = None,
        url: Url = None,
        token_file: TokenFile = None,
        as_json: AsJson = False,
    ) -> None:
        """List the memories that fail today's fidelity check: a word nobody said.

        Each memory the reflex wrote is checked against what it was written from (its
        provenance: the words said and what recall showed; for a memory written before it
        carried them, its turn's words from the agent's turn ledger). A memory with neither
        is unverifiable: listed, never retracted. Exit codes: 0 none fails; 1 some fail (or
        JMFTS failed); 2 bad usage.

        Example: home memory audit --agent edge_asr_memory --retract
        """
        turns = turn_words(data_dir, agent)
        with _client(data_dir, url, token_file) as client:
            audited, retracted = audit_memories(
                client, root or f"workspace/{agent}", turns, retract=retract
            )
        _print_audit(agent, audited, retracted, as_json=as_json)
        finish(ok=not any(a.verdict == "invented" for a in audited))

    return audit


def audit_memories(
    client: SyncJmftsClient, root: str, turns: Mapping[str, str], *, retract: bool
) -> tuple[list[AuditedMemory], dict[int, int | None]]:
    """Every current memory under ``root`` audited against what was said; with ``retract``,
    each that carries a word nobody said is retracted (its id → the retraction's id)."""
    view = _current_view(client, root)
    audited = run_audit(
        (
            (int(item["id"]), str(item.get("content") or ""),
             Provenance.from_structured(item.get("structured_content")))
            for item in view
        ),
        turns,
    )  # fmt: skip
    retracted = {}
    if retract:
        for finding in (a for a in audited if a.verdict == "invented"):
            retracted[finding.id] = forget_memory(
                client, finding.id, finding.retraction_reason()
            ).retraction_id
    return audited, retracted


def _print_audit(
    agent: str, audited: list[AuditedMemory], retracted: dict[int, int | None], *, as_json: bool
) -> None:
    counts = {
        v: sum(a.verdict == v for a in audited) for v in ("faithful", "invented", "unverifiable")
    }
    if as_json:
        rows = [{**a.to_dict(), "retraction_id": retracted.get(a.id)} for a in audited]
        print(json.dumps({"agent": agent, "checked": len(audited), **counts, "memories": rows}))
        return
    title = (
        f"{agent}: {counts['invented']} of {len(audited)} memories carry words nobody "
        f"said ({counts['unverifiable']} unverifiable)"
    )
    table = Table(title=title)
    for column in ("id", "verdict", "memory", "words nobody said"):
        table.add_column(column)
    for a in audited:
        if a.verdict == "faithful":
            continue
        verdict = a.verdict + (" (retracted)" if a.id in retracted else "")
        table.add_row(str(a.id), verdict, escape(a.content[:70]), escape(", ".join(a.invented)))
    console.print(table)


def register(memory_app: CommandApp, *, turn_words: TurnWords) -> None:
    """Add ``forget``, ``restore``, ``show``, ``due`` and ``audit`` to ``home memory``."""
    memory_app.command("forget")(forget)
    memory_app.command("show")(show)
    memory_app.command("restore")(restore)
    memory_app.command("due")(due)
    memory_app.command("audit")(audit_command(turn_words))
