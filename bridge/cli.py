"""``bridge``: check, pair and serve the text-only crossing between an edge and home."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from bridge.check import Severity, check_pair, has_errors, sort_findings
from shared.errors import SchemaError, SchemaIssue
from shared.schema import BridgeHalf, load_bridge_half
from shared.schema.document import detect_kind
from shared.yaml_source import load_yaml

app = typer.Typer(
    name="bridge",
    help="The bridge between a board (edge) and home: only text crosses, over SSH.",
    no_args_is_help=True,
    add_completion=False,
)
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


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
    err = Console(stderr=True)
    try:
        halves = [_load_half(edge), _load_half(home)]
    except SchemaError as exc:
        if as_json:
            issues = [
                {"file": i.file, "line": i.line, "key": i.key, "message": i.message}
                for i in exc.issues
            ]
            print(json.dumps({"ok": False, "error": "unreadable", "issues": issues}, indent=2))
        else:
            for issue in exc.issues:
                err.print(f"[red]error[/red]: {issue}", highlight=False, markup=True)
        raise typer.Exit(EXIT_USAGE) from None
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
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def main() -> None:
    """Console-script entry point."""
    app()
