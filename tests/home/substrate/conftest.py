"""Fixtures: a real home (nats-server + substrate) in a temp data dir, with a test catalog.

The catalog's ``service`` nodes are real Python processes (``echo_node.py``)
started by the substrate's service launcher; the ``tau_agent`` and
``effector`` nodes have no launcher yet and must be reported as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml
from nats.aio.client import Client as NatsClient

from home.substrate.client import HomeClient
from home.substrate.config import HomeConfig
from home.substrate.datadir import STATE_FILE
from home.up import run_home
from shared import control
from shared.bus_credentials import home_admin_url

ECHO_NODE = Path(__file__).with_name("echo_node.py")
WAIT_S = 15.0


def echo_node(
    agent: str, *, max_restarts: int = 1, extra_publishes: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A catalog entry for a real echo node process speaking as ``agent``."""
    health = f"home.test.{agent}.health"
    return {
        "kind": "service",
        "runs_on": "home",
        "publishes": [f"events.workspace.{agent}.out.>", *extra_publishes],
        "subscribes": [f"events.workspace.{agent}.in"],
        "restart_policy": {
            "max_restarts": max_restarts,
            "window_s": 60,
            "backoff_s": 0.1,
            "backoff_max_s": 0.5,
        },
        "config": {
            "command": [
                sys.executable,
                str(ECHO_NODE),
                "--inbox",
                f"events.workspace.{agent}.in",
                "--agent",
                agent,
                "--health",
                health,
            ],
            "health_subject": health,
        },
    }


CATALOG: dict[str, Any] = {
    "catalog": "substrate-tests",
    "nodes": {
        "svc.echo": echo_node("echo"),
        "svc.other": echo_node("other"),
        "svc.journal": {
            **echo_node("journal"),
            "publishes": ["events.journal.append.*"],
        },
        "svc.mute": {
            "kind": "service",
            "runs_on": "home",
            "restart_policy": {
                "max_restarts": 1,
                "window_s": 60,
                "backoff_s": 0.1,
                "backoff_max_s": 5,
            },
            "config": {
                "command": [sys.executable, "-c", "import signal; signal.pause()"],
                "health_subject": "home.test.nobody.answers",
                "ready_timeout_s": 0.3,
            },
        },
        "svc.broken": {
            "kind": "service",
            "runs_on": "home",
            "restart_policy": {
                "max_restarts": 0,
                "window_s": 60,
                "backoff_s": 0.1,
                "backoff_max_s": 5,
            },
            "config": {"command": "not a list"},
        },
        # A board's node: home has no launcher for it, and must say so rather than fake it.
        "edge.ghost": {
            "kind": "edge_audio",
            "runs_on": "edge",
            "device": "ghost",
            "publishes": ["events.sensation.ghost.turn"],
            "subscribes": ["events.workspace.*.out.speak.ghost"],
        },
    },
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "talk": {
        "schema": "talk",
        "requires": {"nodes": ["svc.echo", "svc.journal"]},
        "bindings": [{"from": "events.sensation.*.turn", "to": "svc.echo"}],
    },
    "notes": {
        "schema": "notes",
        "requires": {"nodes": ["svc.journal"]},
        "bindings": [],
    },
    "rival": {
        "schema": "rival",
        "requires": {"nodes": ["svc.other", "svc.journal"]},
        "bindings": [{"from": "events.sensation.*.turn", "to": "svc.other"}],
    },
    "mute": {"schema": "mute", "requires": {"nodes": ["svc.mute"]}, "bindings": []},
    "broken": {"schema": "broken", "requires": {"nodes": ["svc.broken"]}, "bindings": []},
    "ghost": {
        "schema": "ghost",
        "requires": {"nodes": ["edge.ghost"]},
        "bindings": [{"from": "events.workspace.*.out.speak.ghost", "to": "edge.ghost"}],
    },
}


def write_home_files(root: Path) -> tuple[Path, Path]:
    """Write the test catalog and schemas under ``root``; return (catalog, schema dir)."""
    root.mkdir(parents=True, exist_ok=True)
    catalog = root / "nodes.yaml"
    catalog.write_text(yaml.safe_dump(CATALOG, sort_keys=False), encoding="utf-8")
    schema_dir = root / "activation"
    schema_dir.mkdir(exist_ok=True)
    for name, body in SCHEMAS.items():
        (schema_dir / f"{name}.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
    return catalog, schema_dir


@dataclass
class Home:
    """A running in-process home and a NATS connection to it."""

    config: HomeConfig
    nc: NatsClient

    def client(self) -> HomeClient:
        """A control client found through the data dir, as the CLI finds it."""
        return HomeClient(self.config.data_dir)

    async def request(self, verb: str, **args: Any) -> Any:
        """One control request."""
        async with self.client() as client:
            return await client.request(verb, **args)


async def wait_for(
    predicate: Callable[[], Awaitable[bool]], what: str, within: float = WAIT_S
) -> None:
    """Poll ``predicate`` until true; fail naming ``what`` after ``within`` seconds."""

    async def poll() -> None:
        while not await predicate():
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(poll(), within)
    except TimeoutError:
        pytest.fail(f"timed out after {within:g} s waiting for {what}")


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[Home]:
    """A real home: nats-server child process + substrate, in a temp data dir."""
    catalog, schema_dir = write_home_files(tmp_path / "schemas")
    config = HomeConfig(
        data_dir=tmp_path / "data",
        catalog=catalog,
        schema_dir=schema_dir,
        health_interval_s=0.2,
        # The substrate alone: no model, no memory server (their own tests cover them).
        llm_url="none",
        memory=False,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_home(config, stop=stop))
    state_file = config.data_dir / STATE_FILE

    async def up() -> bool:
        if task.done():
            task.result()
        return state_file.exists()

    await wait_for(up, "home up to write its state file")
    nats_url = json.loads(state_file.read_text())["nats_url"]
    nc = await nats.connect(home_admin_url(config.data_dir, nats_url))
    try:
        yield Home(config, nc)
    finally:
        await nc.close()
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT_S)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def nodes(home: Home) -> dict[str, dict[str, Any]]:
    """The home's nodes by name, as `home status` reports them."""
    status = await home.request(control.STATUS)
    return {n["name"]: n for n in status["nodes"]}


async def running_pid(home: Home, node: str) -> int:
    """Wait for ``node`` to run; its pid."""

    async def running() -> bool:
        return (await nodes(home)).get(node, {}).get("state") == "running"

    await wait_for(running, f"{node} to run")
    pid = (await nodes(home))[node]["pid"]
    assert isinstance(pid, int) and alive(pid)
    return pid
