"""``home memory forget|show|due``: retract a memory, show where it came from, list what fades.

Registered onto the ``home memory`` group by :func:`register`. Each talks to a running
JMFTS as the admin principal (``--url``, token from ``--token-file`` or the JMFTS state
directory's ``admin.token``). Exit codes: 0 done; 1 JMFTS refused or failed (not found,
unreachable), or for ``due`` nothing was found to check; 2 bad usage or input.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from home.jmfts.access import ADMIN_TOKEN_FILE
from home.jmfts.cli import DEFAULT_URL
from home.jmfts.client import MemoryClient
from home.jmfts.errors import JmftsError
from home.memory.config import DEFAULT_INITIAL_STABILITY_DAYS, DEFAULT_THRESHOLD, LEDGER_DIRNAME
from home.memory.due import DEFAULT_HORIZON_DAYS, best_scores, due_memories
from home.memory.errors import LedgerError
from home.memory.forget import forget as forget_memory
from home.memory.fsrs import ReviewBook
from home.memory.origin import memory_origin
from home.memory.records import Ledger

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEFAULT_HOME_DIR = Path.home() / ".local" / "share" / "tether"

console = Console()
err_console = Console(stderr=True)

Url = Annotated[str, typer.Option("--url", help="Base URL of the running JMFTS server.")]
HomeDir = Annotated[
    Path, typer.Option("--data-dir", help="The home data directory (jmfts/, agents/ below it).")
]
TokenFile = Annotated[
    Path | None,
    typer.Option("--token-file", help="Bearer token file [default: DATA_DIR/jmfts/admin.token]."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
MemoryId = Annotated[int, typer.Argument(help="The memory's document id.", min=1)]


def _client(url: str, data_dir: Path, token_file: Path | None) -> MemoryClient:
    try:
        return MemoryClient.from_token_file(
            url, token_file or data_dir / "jmfts" / ADMIN_TOKEN_FILE
        )
    except JmftsError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc


def _failed(exc: Exception) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {exc}")
    return typer.Exit(EXIT_FAILURE)


def forget(
    memory_id: MemoryId,
    url: Url = DEFAULT_URL,
    data_dir: HomeDir = DEFAULT_HOME_DIR,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Stop recalling one memory: retracted in a workspace (still found --as-of before), else
    deleted.

    Example: home memory forget 42
    """
    with _client(url, data_dir, token_file) as client:
        try:
            done = forget_memory(client, memory_id)
        except JmftsError as exc:
            raise _failed(exc) from exc
    if as_json:
        print(json.dumps(done.to_dict()))
    elif done.retraction_id is not None:
        console.print(f"#{done.id} retracted by #{done.retraction_id}")
    else:
        console.print(f"#{done.id} deleted")


def show(
    memory_id: MemoryId,
    url: Url = DEFAULT_URL,
    data_dir: HomeDir = DEFAULT_HOME_DIR,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Print one memory and where it came from: agent, schema, turn (binding id), evaluation.

    Example: home memory show 42
    """
    with _client(url, data_dir, token_file) as client:
        try:
            origin = memory_origin(client, memory_id)
        except JmftsError as exc:
            raise _failed(exc) from exc
    if as_json:
        print(json.dumps(origin.to_dict()))
        return
    for line in origin.lines():
        console.print(line, highlight=False, soft_wrap=True)


def _current(client: MemoryClient, root: str) -> list[tuple[int, str, datetime]]:
    """The current (not superseded, not retracted) memories under ``root``."""
    doc = client.resolve(root)
    view = client.request("GET", f"/workspace/{doc['id']}")["current"]
    out = []
    for item in view:
        stamp = item.get("event_time") or item.get("created_at")
        written = datetime.fromisoformat(stamp) if stamp else datetime.now(UTC)
        if written.tzinfo is None:
            written = written.replace(tzinfo=UTC)
        out.append((int(item["id"]), str(item.get("content") or ""), written))
    return out


def due(
    agent: Annotated[str, typer.Argument(help="The agent whose memories to check.")],
    *,
    within_days: Annotated[
        float, typer.Option("--within", help="Horizon in days.", min=0.0)
    ] = DEFAULT_HORIZON_DAYS,
    threshold: Annotated[
        float | None,
        typer.Option(help="The recall threshold [default: the ledger's last, else 0.45]."),
    ] = None,
    root: Annotated[
        str | None, typer.Option(help="The decaying root [default: workspace/AGENT].")
    ] = None,
    url: Url = DEFAULT_URL,
    data_dir: HomeDir = DEFAULT_HOME_DIR,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """List the memories that fall below the recall gate within --within days, soonest first.

    A memory's score against its best question (the best it scored in a recorded search),
    times its FSRS retrievability, is what the gate compares with the threshold: recalled
    and used, a memory's clock starts again; left alone, it fades out of recall.

    Example: home memory due edge_asr_memory --within 7 --json
    """
    state = data_dir / "agents" / agent / LEDGER_DIRNAME
    try:
        ledger = (
            Ledger(state / "searches.jsonl").read() if (state / "searches.jsonl").exists() else []
        )
        book = ReviewBook(state / "reviews.json", DEFAULT_INITIAL_STABILITY_DAYS)
    except LedgerError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    searches = [r for r in ledger if r.get("kind") == "search"]
    gate = threshold if threshold is not None else _last_threshold(searches)
    with _client(url, data_dir, token_file) as client:
        try:
            memories = _current(client, root or f"workspace/{agent}")
        except JmftsError as exc:
            raise _failed(exc) from exc
    now = datetime.now(UTC)
    found = due_memories(
        memories,
        book,
        references=best_scores(searches),
        threshold=gate,
        now=now,
        horizon=timedelta(days=within_days),
    )
    if as_json:
        summary = {"threshold": gate, "within_days": within_days, "checked": len(memories)}
        print(json.dumps({**summary, "due": [d.to_dict() for d in found]}))
        return
    table = Table(title=f"{agent}: {len(found)} of {len(memories)} memories fall below "
                        f"{gate} within {within_days:g} day(s)")  # fmt: skip
    for column in ("id", "days left", "R now", "best score", "memory"):
        table.add_column(column)
    for d in found:
        table.add_row(str(d.id), f"{d.days_left:.2f}", f"{d.retrievability:.3f}",
                      f"{d.reference_score:.3f}", d.content[:70])  # fmt: skip
    console.print(table)


def _last_threshold(searches: list[dict[str, Any]]) -> float:
    for record in reversed(searches):
        value = record.get("threshold")
        if isinstance(value, int | float):
            return float(value)
    return DEFAULT_THRESHOLD


def register(memory_app: typer.Typer) -> None:
    """Add ``forget``, ``show`` and ``due`` to the ``home memory`` group."""
    memory_app.command("forget")(forget)
    memory_app.command("show")(show)
    memory_app.command("due")(due)
