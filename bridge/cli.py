"""``bridge``: check, pair and serve the text-only crossing between an edge and home."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from bridge.check import Severity, check_pair, has_errors, sort_findings
from bridge.pair import pair as pair_device
from bridge.serve import serve_stdio
from shared.cli import CommandApp, finish
from shared.errors import SchemaError, SchemaIssue
from shared.schema import BridgeHalf, load_bridge_half
from shared.schema.document import detect_kind
from shared.yaml_source import load_yaml

app = CommandApp(
    name="bridge",
    help="The bridge between a board (edge) and home: only text crosses, over SSH.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Check, pair and serve bridge halves."""


def _load_half(path: Path) -> BridgeHalf:
    """Load a file that must be a bridge half; SchemaError otherwise."""
    doc = load_yaml(path)
    if detect_kind(doc, str(path)) != "bridge":
        raise SchemaError(
            [
                SchemaIssue(
                    str(path),
                    getattr(doc, "line", None),
                    "",
                    "is not a bridge half (no top-level 'bridge:' key)",
                )
            ]
        )
    return load_bridge_half(path)


@app.command()
def check(
    edge: Annotated[
        Path, typer.Argument(help="The edge half (e.g. schemas/bridge/board.edge.yaml).")
    ],
    home: Annotated[
        Path, typer.Argument(help="The home half (e.g. schemas/bridge/board.home.yaml).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
) -> None:
    """Compare an edge half and a home half offline, before anything is deployed.

    Every export must be imported by the peer and every import exported by it
    (NATS wildcards: an export a.*.c is carried by an import a.>); names, device,
    port and keys must agree; nothing audio may cross; nothing may be both
    imported and exported on one side.

    Exit status: 0 clean (warnings allowed), 1 errors found, 2 a file is
    unreadable or not a bridge half.

    Example:

        bridge check schemas/bridge/board.edge.yaml schemas/bridge/board.home.yaml
    """
    console = Console()
    try:
        halves = [_load_half(edge), _load_half(home)]
    except SchemaError as exc:
        if as_json:
            issues = [
                {"file": i.file, "line": i.line, "key": i.key, "message": i.message}
                for i in exc.issues
            ]
            print(json.dumps({"ok": False, "error": "unreadable", "issues": issues}, indent=2))
        raise
    findings = sort_findings(check_pair(halves[0], halves[1]))
    failed = has_errors(findings)
    if as_json:
        print(
            json.dumps(
                {
                    "ok": not failed,
                    "edge": str(edge),
                    "home": str(home),
                    "findings": [f.to_dict() for f in findings],
                },
                indent=2,
            )
        )
    else:
        for f in findings:
            colour = "red" if f.severity is Severity.ERROR else "yellow"
            console.print(f"[{colour}]{f}[/{colour}]", highlight=False, soft_wrap=True)
        errors = sum(f.severity is Severity.ERROR for f in findings)
        warnings = len(findings) - errors
        verdict = "[red]FAIL[/red]" if failed else "[green]OK[/green]"
        console.print(f"{verdict}: {errors} error(s), {warnings} warning(s)")
    finish(ok=not failed)


@app.command()
def pair(  # noqa: PLR0917 (Typer options are parameters)
    device: Annotated[str, typer.Option("--device", help="The board's name (one token).")],
    home: Annotated[
        str, typer.Option("--home", help="Where the board reaches home: HOST[:PORT] (2222).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Where the two halves go.")] = Path(
        "out/bridge"
    ),
    secrets: Annotated[
        Path | None,
        typer.Option("--secrets", help="Where private keys go (default OUT/secrets, mode 0700)."),
    ] = None,
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            help="Where home's endpoint listens (its half's listen.host); 0.0.0.0 for a real "
            "board on the network, loopback for the TUI.",
        ),
    ] = "127.0.0.1",
    force: Annotated[bool, typer.Option("--force", help="Pair an already paired device again.")] = (
        False
    ),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON.")
    ] = False,
) -> None:
    """Pair a board with home: keys plus both bridge halves, ready for `bridge check`.

    Generates the board's ed25519 key pair and, if absent, the home endpoint's
    host key; writes DEVICE.edge.yaml and DEVICE.home.yaml into OUT with the
    public keys filled in (so the edge pins the host key and home authorizes
    exactly this board's key). Private keys are written with mode 0600 into the
    secrets directory, which may never be under schemas/.

    Example:

        bridge pair --device board --home 192.0.2.10:2222 --out /etc/tether
    """
    result = pair_device(device, home, out, secrets=secrets, listen_host=listen, force=force)
    rows = {
        "edge_half": str(result.edge_half),
        "home_half": str(result.home_half),
        "client_key": str(result.client_key),
        "client_fingerprint": result.client_fingerprint,
        "host_key": str(result.host_key),
        "host_key_created": result.host_key_created,
        "host_fingerprint": result.host_fingerprint,
    }
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"paired {device!r}", show_header=False)
    for key, value in rows.items():
        table.add_row(key, str(value))
    Console().print(table)
    Console().print(f"next: bridge check {result.edge_half} {result.home_half}")


@app.command()
def serve(
    device: Annotated[str, typer.Option("--device", help="The device this SSH key speaks for.")],
    half: Annotated[
        Path | None,
        typer.Option("--half", help="The home half (default schemas/bridge/DEVICE.home.yaml)."),
    ] = None,
    nats_url: Annotated[
        str, typer.Option("--nats", help="Home's local NATS.", envvar="TETHER_NATS_URL")
    ] = "nats://127.0.0.1:4222",
) -> None:
    """Serve one bridge link on stdin/stdout: the OpenSSH forced-command path.

    Declare `Subsystem tether-bridge /bin/false` in sshd_config, and put the
    board's key in the bridge user's authorized_keys with a forced command, so
    OpenSSH authenticates it and this command carries the frames:

        command="bridge serve --device board --half /etc/tether/board.home.yaml",restrict
        ssh-ed25519 AAAA... tether-board     (all on one line)

    stdout carries frames only; logs go to stderr. Exit 0 when the link ends,
    1 when the board's half is refused at hello (or home's NATS does not answer),
    2 on a bad half or device.
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    loaded = _load_half(half or Path(f"schemas/bridge/{device}.home.yaml"))
    asyncio.run(serve_stdio(loaded, device, nats_url))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
