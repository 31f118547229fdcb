"""``home up``: start the home in the foreground."""

from __future__ import annotations

import asyncio
import json
import re
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from home.substrate.cli.common import console
from home.substrate.component import ComponentRegistry
from home.substrate.config import (
    CLUSTER_SECRET_ENV,
    DEFAULT_CATALOG,
    DEFAULT_LOG_MAX_AGE_S,
    DEFAULT_LOG_MAX_BYTES,
    DEFAULT_SCHEMA_DIR,
    ClusterConfig,
    EventLogConfig,
    HomeConfig,
    cluster_secret,
)
from home.substrate.datadir import HomeState
from home.substrate.errors import HomeConfigError
from home.substrate.logs import configure_logging
from home.substrate.options import DataDir
from home.up import components_table, run_home

Catalog = Annotated[Path, typer.Option(help="The node catalog YAML.", exists=True, dir_okay=False)]
SchemaDir = Annotated[
    Path,
    typer.Option(help="Where `home schema apply NAME` finds NAME.yaml.", file_okay=False),
]
Host = Annotated[str, typer.Option(help="Address to listen on (loopback by default).")]
NatsPort = Annotated[int, typer.Option(help="NATS client port; 0 picks a free one.")]
LogMaxBytes = Annotated[int, typer.Option(help="Event log bound: bytes kept in the stream.")]
LogMaxAge = Annotated[float, typer.Option(help="Event log bound: seconds an event is kept.")]
Restore = Annotated[
    bool, typer.Option(help="Re-apply the schemas that were active at the last stop.")
]
Apply = Annotated[
    list[str] | None,
    typer.Option(
        "--apply", help="Apply this schema (a NAME in --schema-dir) at start; repeatable."
    ),
]
LlmUrl = Annotated[
    str | None,
    typer.Option(
        envvar="TETHER_LLM_URL",
        help="Point every agent at this OpenAI-compatible endpoint (…/v1: ollama, "
        "llama.cpp, vLLM, a hosted API) instead of the embedded model; 'none' runs no model.",
    ),
]
LlmModel = Annotated[
    str, typer.Option(envvar="TETHER_LLM_MODEL", help="The model id to request from --llm-url.")
]
Memory = Annotated[
    bool,
    typer.Option(help="Run the JMFTS memory server, with a principal and token per agent."),
]
BridgePort = Annotated[
    int | None,
    typer.Option(
        envvar="TETHER_BRIDGE_PORT",
        help="Port of the bridge's SSH endpoint (default: the paired halves' listen port, "
        "2222); it runs when a device is paired into DATA_DIR/bridge.",
    ),
]
BusAuth = Annotated[
    bool,
    typer.Option(
        "--bus-auth/--no-bus-auth",
        hidden=True,
        help="One bus user per node, enforced by nats-server. Off only to measure its "
        "cost (tests/bench/substrate.py): then any local process can speak for any node.",
    ),
]
Member = Annotated[
    str | None,
    typer.Option(
        help="Run as this member of a home spread over machines (default: the data "
        "directory's name once --cluster-port or --join is given).",
    ),
]
ClusterPort = Annotated[
    int | None,
    typer.Option(
        help="Listen for the other members' routes on this port: the home becomes a "
        "cluster member; the routes' password comes from TETHER_CLUSTER_SECRET.",
    ),
]
Join = Annotated[
    list[str] | None,
    typer.Option(
        "--join",
        metavar="URL",
        help="Join the home whose member listens for routes at URL (nats://HOST:PORT, "
        "its --cluster-port); repeatable. Its event log and agent inboxes then live on "
        "every member, and this member runs the schemas it is given with --apply.",
    ),
]
AsJsonLog = Annotated[bool, typer.Option("--json", help="Log JSON lines to stderr.")]


def up(  # noqa: PLR0917 - Typer maps each option to a parameter
    data_dir: DataDir,
    catalog: Catalog = DEFAULT_CATALOG,
    schema_dir: SchemaDir = DEFAULT_SCHEMA_DIR,
    host: Host = "127.0.0.1",
    nats_port: NatsPort = 0,
    log_max_bytes: LogMaxBytes = DEFAULT_LOG_MAX_BYTES,
    log_max_age: LogMaxAge = DEFAULT_LOG_MAX_AGE_S,
    restore: Restore = True,
    apply: Apply = None,
    llm_url: LlmUrl = None,
    llm_model: LlmModel = "default",
    memory: Memory = True,
    bridge_port: BridgePort = None,
    bus_auth: BusAuth = True,
    member: Member = None,
    cluster_port: ClusterPort = None,
    join: Join = None,
    as_json: AsJsonLog = False,
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

        TETHER_CLUSTER_SECRET=s3cret home up --data-dir /tmp/m2 --cluster-port 6251 \\
            --join nats://127.0.0.1:6250 --apply edge_asr    # a second member
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
        bridge_port=bridge_port,
        llm_url=llm_url,
        llm_model=llm_model,
        memory=memory,
        bus_auth=bus_auth,
        cluster=cluster_config(data_dir.resolve(), member, cluster_port, tuple(join or ())),
    )
    asyncio.run(run_home(config, partial(print_ready, as_json=as_json)))


def print_ready(state: HomeState, registry: ComponentRegistry, *, as_json: bool) -> None:
    """What runs where, once the home is up: a table, or one JSON line."""
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


def cluster_config(
    data_dir: Path, member: str | None, port: int | None, join: tuple[str, ...]
) -> ClusterConfig | None:
    """The member this ``home up`` is, or None for a home on one machine.

    Raises HomeConfigError naming the option that is missing or wrong.
    """
    if port is None and not join and member is None:
        return None
    if port is None:
        raise HomeConfigError("a cluster member needs --cluster-port (where its routes arrive)")
    secret = cluster_secret()
    if secret is None:
        raise HomeConfigError(
            f"a cluster member needs the routes' password in ${CLUSTER_SECRET_ENV} "
            "(the same on every member)"
        )
    name = member or data_dir.name
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise HomeConfigError(f"--member {name!r}: use letters, digits, '-' and '_' only")
    for url in join:
        if not re.fullmatch(r"nats://[^@/\s]+:\d+", url):
            raise HomeConfigError(f"--join {url!r}: expected nats://HOST:PORT")
    return ClusterConfig(member=name, port=port, join=join, secret=secret)
