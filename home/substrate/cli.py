"""The substrate's commands of ``home``: up, status, schema, events, trace."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from home.substrate import control
from home.substrate.client import HomeClient
from home.substrate.component import ComponentRegistry
from home.substrate.config import (
    DEFAULT_CATALOG,
    DEFAULT_LOG_MAX_AGE_S,
    DEFAULT_LOG_MAX_BYTES,
    DEFAULT_SCHEMA_DIR,
    EventLogConfig,
    HomeConfig,
    default_data_dir,
)
from home.substrate.datadir import HomeState
from home.substrate.errors import (
    ComponentError,
    ControlError,
    HomeAlreadyRunning,
    HomeNotRunning,
    LaunchError,
)
from home.substrate.eventlog import EVENTS_SUBJECT, LoggedEvent, event_summary, read_log, trace
from home.substrate.logs import configure_logging
from home.substrate.up import components_table, run_home

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
T = TypeVar("T")

console = Console()
err = Console(stderr=True, soft_wrap=True)

DataDir = Annotated[
    Path,
    typer.Option(
        "--data-dir",
        help="The home's data directory (state file, NATS store, logs). "
        "Default: $TETHER_HOME_DIR, else $XDG_DATA_HOME/tether/home.",
        default_factory=default_data_dir,
        show_default=False,
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _run_client(data_dir: Path, work: Callable[[HomeClient], Awaitable[T]]) -> T:
    """Run ``work`` against the home on ``data_dir``, turning failures into exit codes."""

    async def go() -> T:
        async with HomeClient(data_dir) as home:
            return await work(home)

    try:
        return asyncio.run(go())
    except HomeNotRunning as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_FAILURE) from None
    except ControlError as exc:
        err.print(f"[red]error[/red] ({exc.code}): {escape(exc.message)}", highlight=False)
        usage = exc.code in (control.BAD_REQUEST, control.NOT_FOUND)
        raise typer.Exit(EXIT_USAGE if usage else EXIT_FAILURE) from None
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_OK) from None


# --- home up ----------------------------------------------------------------------------


def up(  # noqa: PLR0917 - Typer maps each option to a parameter
    data_dir: DataDir,
    catalog: Annotated[
        Path, typer.Option(help="The node catalog YAML.", exists=True, dir_okay=False)
    ] = DEFAULT_CATALOG,
    schema_dir: Annotated[
        Path,
        typer.Option(help="Where `home schema apply NAME` finds NAME.yaml.", file_okay=False),
    ] = DEFAULT_SCHEMA_DIR,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    nats_port: Annotated[int, typer.Option(help="NATS client port; 0 picks a free one.")] = 0,
    log_max_bytes: Annotated[
        int, typer.Option(help="Event log bound: bytes kept in the stream.")
    ] = DEFAULT_LOG_MAX_BYTES,
    log_max_age: Annotated[
        float, typer.Option(help="Event log bound: seconds an event is kept.")
    ] = DEFAULT_LOG_MAX_AGE_S,
    restore: Annotated[
        bool, typer.Option(help="Re-apply the schemas that were active at the last stop.")
    ] = True,
    apply: Annotated[
        list[str] | None,
        typer.Option(
            "--apply", help="Apply this schema (a NAME in --schema-dir) at start; repeatable."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Log JSON lines to stderr.")] = False,
) -> None:
    """Start the home and stay in the foreground until Ctrl-C or SIGTERM.

    Starts, on loopback under one data directory, a nats-server with JetStream
    (the event log of events.>) and the substrate (schemas, router, node
    supervision, control on home.control.>), prints what runs where, and on
    Ctrl-C or SIGTERM stops everything in reverse order. A second `home up` on
    the same data directory refuses.

    Example:

        home up --data-dir /tmp/home1    # then, elsewhere: home status --data-dir /tmp/home1

        home up --apply edge_asr         # start with the shipped schema active
    """
    configure_logging(as_json)
    config = HomeConfig(
        data_dir=data_dir.resolve(),
        host=host,
        nats_port=nats_port,
        catalog=catalog.resolve(),
        schema_dir=schema_dir.resolve(),
        event_log=EventLogConfig(max_bytes=log_max_bytes, max_age_s=log_max_age),
        restore_schemas=restore,
        apply_at_start=tuple(apply or ()),
    )

    def ready(state: HomeState, registry: ComponentRegistry) -> None:
        if as_json:
            print(json.dumps({"event": "ready", "state": state.__dict__}), flush=True)
            return
        table = Table(title=f"home up: {state.data_dir}")
        for column in ("component", "address", "pid", "state"):
            table.add_column(column)
        for row in components_table(registry):
            table.add_row(row["name"], row["address"], str(row["pid"]), row["state"])
        console.print(table)
        console.print(f"state file: {Path(state.data_dir) / 'home.json'}; Ctrl-C stops.")

    try:
        asyncio.run(run_home(config, ready))
    except HomeAlreadyRunning as exc:
        err.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_FAILURE) from None
    except (ComponentError, LaunchError) as exc:
        err.print(f"[red]error[/red]: home did not start: {escape(str(exc))}", highlight=False)
        raise typer.Exit(EXIT_FAILURE) from None


# --- home status ------------------------------------------------------------------------


def status(data_dir: DataDir, as_json: AsJson = False) -> None:
    """Components, nodes, active schemas, event rates and dropped-event counts.

    Exit status 0 when every component is healthy and no schema is degraded,
    1 otherwise (or when no home runs on the data directory).
    """
    result: dict[str, Any] = _run_client(data_dir, lambda home: home.request(control.STATUS))
    healthy = all(c["state"] == "healthy" for c in result.get("components", [])) and all(
        s["state"] != "degraded" for s in result["schemas"]
    )
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        _print_status(result)
    raise typer.Exit(EXIT_OK if healthy else EXIT_FAILURE)


def _print_status(result: dict[str, Any]) -> None:
    table = Table(title=f"home {result['data_dir']} (pid {result['pid']})")
    for column in ("component", "address", "pid", "state", "last error"):
        table.add_column(column)
    for c in result.get("components", []):
        table.add_row(
            c["name"],
            c["address"],
            str(c["pid"]),
            _state(c["state"]),
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
            _state(n["state"]),
            str(n["pid"] or ""),
            str(n["restarts"]),
            refs,
            escape(n["reason"]),
        )
    console.print(nodes)
    _print_schemas(result["schemas"])
    router = result["router"]
    dropped = router["dropped"]
    console.print(
        f"router: {router['routed']} routed, {router['resolved_speak']} speaks resolved, "
        f"{router['routed_per_s']:.1f}/s; dropped: "
        + ", ".join(f"{k} {v}" for k, v in dropped.items())
    )
    for reason, message in router["last_error"].items():
        console.print(f"  last {reason}: {escape(message)}", highlight=False)
    log = result["event_log"]
    if "messages" in log:
        console.print(
            f"event log {log['stream']}: {log['messages']} events, {log['bytes']} bytes, "
            f"{log.get('events_per_s', 0.0):.1f}/s"
        )


def _state(state: str) -> str:
    color = {
        "healthy": "green",
        "running": "green",
        "active": "green",
        "degraded": "red",
        "failed": "red",
        "unavailable": "red",
        "unhealthy": "red",
    }
    return f"[{color.get(state, 'yellow')}]{state}[/]"


def _print_schemas(schemas: list[dict[str, Any]]) -> None:
    table = Table(title="schemas")
    for column in ("schema", "state", "nodes", "why"):
        table.add_column(column)
    for s in schemas:
        table.add_row(s["name"], _state(s["state"]), ", ".join(s["nodes"]), escape(s["reason"]))
    console.print(table)


# --- home schema ------------------------------------------------------------------------

schema_app = typer.Typer(
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
            err.print(f"[red]error[/red]: cannot read {path}: {exc.strerror}", highlight=False)
            raise typer.Exit(EXIT_USAGE) from None
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

    result = _run_client(data_dir, work)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        console.print(
            f"applied {result['name']}: {_state(result['state'])} {escape(result['reason'])}"
        )


@schema_app.command("unapply")
def schema_unapply(
    name: Annotated[str, typer.Argument(help="The active schema's name.")],
    data_dir: DataDir,
    as_json: AsJson = False,
) -> None:
    """Unroute a schema's bindings and stop the nodes no other active schema needs."""
    result = _run_client(data_dir, lambda home: home.request(control.SCHEMA_UNAPPLY, name=name))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        console.print(f"unapplied {result['name']}")


@schema_app.command("list")
def schema_list(data_dir: DataDir, as_json: AsJson = False) -> None:
    """The active schemas with their state: active, starting, or degraded and why."""
    result = _run_client(data_dir, lambda home: home.request(control.SCHEMA_LIST))
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        _print_schemas(result)


# --- home events / trace ----------------------------------------------------------------


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

    _run_client(data_dir, work)


def trace_command(
    binding_id: Annotated[str, typer.Argument(help="The binding_id of one turn.")],
    data_dir: DataDir,
    as_json: AsJson = False,
) -> None:
    """One turn, in order, across every subject it touched, with the time between lines.

    Exit status 1 when the log holds no event of that binding_id.
    """
    found: list[LoggedEvent] = _run_client(
        data_dir, lambda home: trace(home.nc, EventLogConfig().stream, binding_id)
    )
    if as_json:
        print(json.dumps([item.to_dict() for item in found], indent=2, ensure_ascii=False))
    else:
        _print_trace(binding_id, found)
    if not found:
        raise typer.Exit(EXIT_FAILURE)


def _print_trace(binding_id: str, found: list[LoggedEvent]) -> None:
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


def register(app: typer.Typer) -> None:
    """Add the substrate's commands to the root ``home`` app."""
    app.command("up")(up)
    app.command("status")(status)
    app.add_typer(schema_app, name="schema")
    app.command("events")(events)
    app.command("trace")(trace_command)
