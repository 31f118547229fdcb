"""``home status``: components, nodes, schemas, router and event log; on a clustered
home also every member, and the nodes each runs."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from home.substrate.cli.common import (
    AsJson,
    console,
    run_client,
    state_markup,
)
from home.substrate.client import HomeClient
from home.substrate.options import DataDir
from shared import control
from shared.cli import finish
from shared.errors import ControlError, HomeNotRunning

Wait = Annotated[
    float,
    typer.Option(
        "--wait",
        metavar="SECONDS",
        min=0,
        help="Keep asking until home runs and every component is healthy, for up to "
        "SECONDS (for scripts that just started `home up`).",
    ),
]
_WAIT_POLL_S = 0.5


def status(data_dir: DataDir, as_json: AsJson = False, wait: Wait = 0.0) -> None:
    """Components, nodes, active schemas, event rates and dropped-event counts.

    Exit status 0 when every component is healthy and no schema is degraded,
    1 otherwise (or when no home runs on the data directory).

    Example (a script that started home in the background):

        home up --data-dir /tmp/home1 &  home status --data-dir /tmp/home1 --wait 120
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            result: dict[str, Any] = asyncio.run(_fetch(data_dir))
        except (HomeNotRunning, ControlError):
            # Starting: no state file yet, or the control surface not answering yet.
            if time.monotonic() < deadline:
                time.sleep(_WAIT_POLL_S)
                continue
            result = run_client(data_dir, lambda home: home.request(control.STATUS))
        if _healthy(result) or time.monotonic() >= deadline:
            break
        time.sleep(_WAIT_POLL_S)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        _print_status(result)
    finish(ok=_healthy(result))


async def _fetch(data_dir: Path) -> dict[str, Any]:
    async with HomeClient(data_dir) as home:
        result: dict[str, Any] = await home.request(control.STATUS)
        return result


def _healthy(result: dict[str, Any]) -> bool:
    return all(c["state"] == "healthy" for c in result.get("components", [])) and all(
        s["state"] != "degraded" for s in result["schemas"]
    )


def _print_status(result: dict[str, Any]) -> None:
    table = Table(title=f"home {result['data_dir']} (pid {result['pid']})")
    for column in ("component", "address", "pid", "state", "last error"):
        table.add_column(column)
    for c in result.get("components", []):
        table.add_row(
            c["name"],
            c["address"],
            str(c["pid"]),
            state_markup(c["state"]),
            escape(c["last_error"] or ""),
        )
    console.print(table)
    nodes = Table(title="nodes")
    for column in ("node", "kind", "state", "pid", "restarts", "schemas", "reason"):
        nodes.add_column(column)
    for n in result["nodes"]:
        refs = ", ".join(result["node_refs"].get(n["name"], []))
        nodes.add_row(
            n["name"],
            n["kind"],
            state_markup(n["state"]),
            str(n["pid"] or ""),
            str(n["restarts"]),
            refs,
            escape(n["reason"]),
        )
    console.print(nodes)
    print_schemas(result["schemas"])
    _print_cluster(result.get("cluster"))
    router = result["router"]
    dropped = router["dropped"]
    console.print(
        f"router: {router['routed']} routed, {router['resolved_speak']} speaks resolved, "
        f"{router['redelivered']} taken again after a router died, "
        f"{router['routed_per_s']:.1f}/s; dropped: "
        + ", ".join(f"{k} {v}" for k, v in dropped.items())
    )
    for reason, message in router["last_error"].items():
        console.print(f"  last {reason}: {escape(message)}", highlight=False)
    _print_bus(result.get("bus"))
    log = result["event_log"]
    if "messages" in log:
        console.print(
            f"event log {log['stream']}: {log['messages']} events, {log['bytes']} bytes, "
            f"{log.get('events_per_s', 0.0):.1f}/s"
            + (f"; recreated {log['recreated']} time(s)" if log.get("recreated") else "")
        )
    elif "error" in log:
        console.print(f"event log: [red]{escape(log['error'])}[/red]")


def print_schemas(schemas: list[dict[str, Any]]) -> None:
    table = Table(title="schemas")
    for column in ("schema", "state", "nodes", "why"):
        table.add_column(column)
    for s in schemas:
        table.add_row(
            s["name"], state_markup(s["state"]), ", ".join(s["nodes"]), escape(s["reason"])
        )
    console.print(table)


def _print_cluster(cluster: dict[str, Any] | None) -> None:
    """Every member of a clustered home, and where each node runs."""
    if cluster is None:
        return
    members = Table(title=f"members (this one: {cluster['member']})")
    for column in ("member", "alive", "bus", "pid", "nodes"):
        members.add_column(column)
    for m in cluster["members"]:
        nodes = ", ".join(f"{n['name']} ({n['state']})" for n in m["nodes"])
        members.add_row(
            m["member"],
            "[green]alive[/green]" if m["alive"] else "[red]gone[/red]",
            m["nats_url"],
            str(m["pid"]),
            escape(nodes),
        )
    console.print(members)
    for gone, by in cluster["adopted"].items():
        console.print(f"  {escape(gone)} was lost; its schemas run on {escape(by)}")
    console.print(f"JetStream servers current: {', '.join(cluster['jetstream_peers'])}")


def _print_bus(bus: dict[str, Any] | None) -> None:
    """Each bus user with its permission counts, and every refusal the server counted."""
    if bus is None:
        return
    if not bus["authorization"]:
        console.print("bus: [red]no authorization[/red]: any local process can speak for any node")
        return
    users = Table(title="bus users")
    for column in ("user", "publish", "subscribe"):
        users.add_column(column)
    for user in bus["users"]:
        users.add_row(user["user"], str(user["publish"]), str(user["subscribe"]))
    console.print(users)
    for v in bus["violations"]:
        console.print(
            f"  refused: {escape(v['user'])} may not {v['kind']} {escape(v['subject'])} "
            f"({v['count']}x)",
            highlight=False,
        )
