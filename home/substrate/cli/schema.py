"""``home schema apply|unapply|list``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from home.substrate.cli.common import (
    AsJson,
    console,
    run_client,
    state_markup,
)
from home.substrate.cli.status import print_schemas
from home.substrate.client import HomeClient
from home.substrate.options import DataDir
from shared import control
from shared.cli import CommandApp
from shared.errors import UsageError

schema_app = CommandApp(
    help="Apply, unapply and list activation schemas on a running home.",
    no_args_is_help=True,
)


@schema_app.command("apply")
def schema_apply(
    schema: Annotated[str, typer.Argument(help="A schema NAME (from the schema dir) or a FILE.")],
    data_dir: DataDir,
    allow_overlap: Annotated[
        bool, typer.Option(help="Apply even if another active schema publishes the same rail.")
    ] = False,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for its nodes to come up (0: do not wait).")
    ] = 10.0,
    as_json: AsJson = False,
) -> None:
    """Start the nodes a schema requires (ref-counted) and route its bindings.

    Refused when a node of the schema would publish a rail that an active
    schema's node already publishes for the same device (names both and the
    rail); --allow-overlap overrides.

    Examples:

        home schema apply edge_asr
        home schema apply ./my-schema.yaml --allow-overlap
    """
    path = Path(schema)
    args: dict[str, Any] = {"allow_overlap": allow_overlap}
    if path.suffix in (".yaml", ".yml") or path.is_file():
        try:
            args.update(file=str(path.resolve()), text=path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    else:
        args["name"] = schema

    async def work(home: HomeClient) -> dict[str, Any]:
        applied: dict[str, Any] = await home.request(control.SCHEMA_APPLY, **args)
        deadline = asyncio.get_running_loop().time() + wait
        while applied["state"] == "starting" and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
            listed = await home.request(control.SCHEMA_LIST)
            applied = next((s for s in listed if s["name"] == applied["name"]), applied)
        return applied

    result = run_client(data_dir, work)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        console.print(
            f"applied {result['name']}: {state_markup(result['state'])} {escape(result['reason'])}"
        )


@schema_app.command("unapply")
def schema_unapply(
    name: Annotated[str, typer.Argument(help="The active schema's name.")],
    data_dir: DataDir,
    as_json: AsJson = False,
) -> None:
    """Unroute a schema's bindings and stop the nodes no other active schema needs."""
    result = run_client(data_dir, lambda home: home.request(control.SCHEMA_UNAPPLY, name=name))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        console.print(f"unapplied {result['name']}")


@schema_app.command("list")
def schema_list(data_dir: DataDir, as_json: AsJson = False) -> None:
    """The active schemas with their state: active, starting, or degraded and why."""
    result = run_client(data_dir, lambda home: home.request(control.SCHEMA_LIST))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print_schemas(result)
