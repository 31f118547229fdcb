"""A home spread over three members on loopback, each its own ``home up`` process tree.

Each member has its own data directory, ports and processes, standing in for a
machine; :meth:`Member.kill` SIGKILLs the whole tree at once (``home up``, its
nats-server and its nodes), as a machine that loses power would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.bus_credentials import home_admin_url
from shared.proc import free_port
from tests.support.home_up import home_status
from tests.support.scripted_model import Responder, ScriptedModel

START_TIMEOUT_S = 240.0
SECRET = "loopback-cluster-secret"
AGENT = "agent.edge_asr"
# One τ agent answering every device's turn: no memory server, no operator, no effectors.
TURNS_SCHEMA = {
    "schema": "cluster_turns",
    "requires": {"nodes": [AGENT]},
    "bindings": [{"from": "events.sensation.*.turn", "to": AGENT}],
}


def write_turns_schema(schema_dir: Path) -> Path:
    """``schema_dir`` with :data:`TURNS_SCHEMA` in it, for ``--schema-dir``."""
    schema_dir.mkdir(parents=True, exist_ok=True)
    (schema_dir / "cluster_turns.yaml").write_text(json.dumps(TURNS_SCHEMA))
    return schema_dir


def descendants(pid: int) -> list[int]:
    """Every living process under ``pid`` (from /proc), children before their children."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        for child in parents.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


@dataclass
class Member:
    """One member: its ``home up`` process, data directory and cluster port (0: a home
    alone, no cluster)."""

    name: str
    data_dir: Path
    cluster_port: int
    proc: asyncio.subprocess.Process | None = None
    killed: bool = False
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.data_dir.parent / f"{self.name}.log"

    @property
    def route(self) -> str:
        """Where other members join this one."""
        return f"nats://127.0.0.1:{self.cluster_port}"

    def admin_url(self) -> str:
        """This member's bus, as the home's admin user."""
        state = json.loads((self.data_dir / "home.json").read_text())
        return home_admin_url(self.data_dir, state["nats_url"])

    async def status(self) -> dict[str, Any] | None:
        """``home status --json`` asked of this member, or None while it cannot say."""
        return await home_status(self.data_dir)

    def kill(self) -> None:
        """SIGKILL the member's whole process tree at once."""
        assert self.proc is not None
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.killed = True


def environment() -> dict[str, str]:
    """Ours, with the routes' password every member shares."""
    return {**os.environ, "TETHER_CLUSTER_SECRET": SECRET}


async def start_member(
    member: Member,
    llm_url: str,
    join: Sequence[Member],
    args: Sequence[str],
    *,
    memory: bool = False,
) -> None:
    """``home up`` as ``member``, joining ``join`` (with its memory server when
    ``memory``); returns at once (see :func:`wait_for`)."""
    member.data_dir.mkdir(parents=True, exist_ok=True)
    joins = [arg for other in join for arg in ("--join", other.route)]
    if member.cluster_port:
        joins = ["--member", member.name, "--cluster-port", str(member.cluster_port), *joins]
    log = member.log_path.open("ab")
    try:
        member.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "home.cli", "up", "--json", "--data-dir", str(member.data_dir),
            *joins, "--llm-url", llm_url, *([] if memory else ["--no-memory"]),
            "--bridge-port", "0", *args,
            stdout=log, stderr=log, env=environment(),
        )  # fmt: skip
    finally:
        log.close()


def cluster_ready(status: dict[str, Any] | None, members: int) -> bool:
    """The member answers, sees ``members`` alive (none: a home alone), and every schema
    and node of it runs."""
    if not status or ("cluster" not in status and members):
        return False
    alive = [m for m in status.get("cluster", {"members": []})["members"] if m["alive"]]
    return (
        len(alive) == members
        and all(s["state"] == "active" for s in status["schemas"])
        and all(n["state"] == "running" for n in status["nodes"])
    )


def not_ready(status: dict[str, Any] | None) -> str:
    """What a member's status shows of its members, schemas and nodes: why it is not ready."""
    if not status:
        return "no status"
    cluster = status.get("cluster", {})
    return json.dumps(
        {
            "members": {
                m["member"]: (m["alive"], m["last_heartbeat_s"]) for m in cluster.get("members", [])
            },
            "schemas": {s["name"]: s["state"] for s in status["schemas"]},
            "nodes": {n["name"]: n["state"] for n in status["nodes"]},
            "jetstream_peers": cluster.get("jetstream_peers"),
            "adopted": cluster.get("adopted"),
        }
    )


def log_tail(member: Member, lines: int = 40) -> str:
    """The end of the member's ``home up`` log."""
    try:
        return "\n".join(member.log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return repr(exc)


async def wait_for(members: Sequence[Member], alive: int) -> None:
    """Until every member in ``members`` is ready and sees ``alive`` members; on timeout,
    what each member last said of itself and the end of its log."""
    last: dict[str, dict[str, Any] | None] = {}
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            for member in members:
                last[member.name] = await member.status()
                while not cluster_ready(last[member.name], alive):
                    assert member.proc is not None and member.proc.returncode is None, (
                        member.log_path.read_text()
                    )
                    await asyncio.sleep(0.5)
                    last[member.name] = await member.status()
    except TimeoutError:
        said = [f"{m.name}: {not_ready(last.get(m.name))}\n{log_tail(m)}" for m in members]
        raise AssertionError(
            f"not {alive} members ready within {START_TIMEOUT_S:.0f} s:\n" + "\n\n".join(said)
        ) from None


@contextlib.asynccontextmanager
async def home_cluster(
    root: Path,
    llm_url: str,
    applied: dict[str, Sequence[str]],
    extra_args: Sequence[str] = (),
    *,
    memory: bool = False,
) -> AsyncIterator[list[Member]]:
    """Three members m1, m2, m3 (m2 and m3 join m1), each applying ``applied[name]``,
    each started with ``extra_args`` too (and a memory server each, when ``memory``)."""
    members = [Member(f"m{i}", root / f"m{i}", free_port()) for i in (1, 2, 3)]
    try:
        for i, member in enumerate(members):
            schemas = [arg for name in applied.get(member.name, ()) for arg in ("--apply", name)]
            await start_member(
                member, llm_url, members[:1] if i else [], [*extra_args, *schemas], memory=memory
            )
        await wait_for(members, alive=3)
        yield members
    finally:
        for member in members:
            if member.proc is not None and member.proc.returncode is None:
                member.proc.terminate()
        for member in members:
            if member.proc is None:
                continue
            try:
                await asyncio.wait_for(member.proc.wait(), 60)
            finally:
                if member.proc.returncode is None:
                    member.kill()
                    await member.proc.wait()


def turns_args(root: Path) -> list[str]:
    """The arguments that let a member apply :data:`TURNS_SCHEMA` (written under ``root``)."""
    return ["--schema-dir", str(write_turns_schema(root / "schemas"))]


@contextlib.asynccontextmanager
async def turns_cluster(
    root: Path, responder: Responder
) -> AsyncIterator[tuple[ScriptedModel, list[Member]]]:
    """:func:`home_cluster` with :data:`TURNS_SCHEMA` applied on m3, its agent answered by
    a scripted model with ``responder``; start a member again with :func:`turns_args`."""
    async with (
        ScriptedModel(responder=responder) as model,
        home_cluster(
            root, model.url, {"m3": [str(TURNS_SCHEMA["schema"])]}, extra_args=turns_args(root)
        ) as members,
    ):
        yield model, members
