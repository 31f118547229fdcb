"""How each node kind is started: the launcher table (kind → :class:`Launcher`).

A launcher turns a catalog :class:`~shared.schema.NodeSpec` into a running
:class:`NodeHandle`; :class:`~home.substrate.nodes.NodeRunner` supervises the
handle under the node's restart policy. :data:`LAUNCHERS` holds the kind the
substrate runs by itself (``service``); ``home up`` hands the substrate a table
that adds ``tau_agent``, ``tau_bus_agent`` and ``effector``
(:func:`home.up.node_launchers`). A kind with no launcher is reported
as unavailable ("no launcher for kind X yet"), never faked.

The ``service`` launcher runs ``config.command`` (a list of strings) as a
child process with ``NATS_URL`` (carrying the node's own bus credentials),
``TETHER_NODE`` and ``TETHER_NODE_DIR`` set
plus ``config.env``. If ``config.health_subject`` is set, the node is healthy
only while a request there is answered; otherwise while the process lives.
``config.ready_timeout_s`` (default 10) bounds how long it may take to become
healthy after a start.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nats.aio.client import NO_RESPONDERS_STATUS
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js.api import Header

from home.substrate.component import Health
from home.substrate.config import inherited_environment
from home.substrate.errors import ComponentError, LaunchError
from home.substrate.process import spawn
from shared.lifecycle import cancelling
from shared.proc import terminate
from shared.schema import NodeSpec

HEALTH_REQUEST_TIMEOUT_S = 1.0


def node_health_subject(node: str) -> str:
    """``home.node.<node>.health``: a node answers here once it serves (any reply is ok)."""
    return f"home.node.{node}.health"


def health_reply_prefix(subject: str) -> str:
    """``_HEALTH.<subject>``: where the answers to health requests on ``subject`` go.

    The node that answers ``subject`` may publish under it by a grant of its own
    (docs/architecture.md "Security"): nats-server's permission to answer a request
    it delivered is forgotten when its configuration is reloaded (a device paired,
    say) between the request and the answer, which refused a healthy node's answer.
    """
    return f"_HEALTH.{subject}"


class NodeServices(Protocol):
    """The addresses of home's other components that a launched node is given, read when
    it starts (a component restarted in place may have moved); None: not running."""

    @property
    def llm_url(self) -> str | None:
        """The language model's OpenAI-compatible base URL."""

    @property
    def jmfts_url(self) -> str | None:
        """The memory server's base URL."""


@dataclass(frozen=True)
class FixedServices:
    """:class:`NodeServices` that do not move (none, by default): for a substrate run
    without the other components, and for tests."""

    llm_url: str | None = None
    jmfts_url: str | None = None


@dataclass(frozen=True)
class LaunchContext:
    """What every launcher may use: the home's NATS, a directory for the node, and the
    addresses of the home's other components."""

    nats_url: str
    nc: NatsClient
    node_dir: Path
    services: NodeServices = field(default_factory=FixedServices)


class NodeHandle(Protocol):
    """One running instance of a node."""

    @property
    def pid(self) -> int | None:
        """The process id, if the node is a process."""

    async def wait(self) -> int:
        """Return the exit code once the node has exited."""

    async def health(self) -> Health:
        """Whether the node serves right now."""

    async def close(self) -> None:
        """Stop the node; nothing of it is left running."""


class Launcher(Protocol):
    """Starts nodes of one kind."""

    async def launch(self, spec: NodeSpec, ctx: LaunchContext) -> NodeHandle:
        """Start ``spec``; raise LaunchError if it cannot be started at all."""


class ProcessHandle:
    """A node that is one child process, optionally answering a health subject."""

    def __init__(
        self, proc: asyncio.subprocess.Process, nc: NatsClient, health_subject: str | None
    ) -> None:
        self._proc = proc
        self._nc = nc
        self._health_subject = health_subject

    @property
    def pid(self) -> int | None:
        """The child's pid."""
        return self._proc.pid

    async def wait(self) -> int:
        """The child's exit code (negative: killed by that signal)."""
        return await self._proc.wait()

    async def health(self) -> Health:
        """Alive, and answering its health subject if it has one."""
        if self._proc.returncode is not None:
            return Health(False, f"exited with code {self._proc.returncode}")
        if self._health_subject is None:
            return Health(True)
        reply = f"{health_reply_prefix(self._health_subject)}.{uuid.uuid4().hex}"
        try:
            answer = await self._nc.subscribe(reply, max_msgs=1)
            try:
                await self._nc.publish(self._health_subject, b"", reply=reply)
                got = await answer.next_msg(timeout=HEALTH_REQUEST_TIMEOUT_S)
                # nats-server's own answer when nobody subscribes the subject.
                if got.headers and got.headers.get(Header.STATUS) == NO_RESPONDERS_STATUS:
                    raise NoRespondersError
            finally:
                with contextlib.suppress(NatsError):
                    await answer.unsubscribe()
        except (NatsError, TimeoutError) as exc:
            if cancelling():
                # nats-py turns a cancel that lands in next_msg on a closed connection into
                # ConnectionClosedError; read as "unhealthy", it kept a stopping node's
                # supervisor looping, and home up from stopping.
                raise asyncio.CancelledError from exc
            return Health(False, f"no answer on {self._health_subject}: {type(exc).__name__}")
        return Health(True)

    async def close(self) -> None:
        """Terminate the child."""
        await terminate(self._proc, group=True)


class ServiceLauncher:
    """Runs a ``service`` node's ``config.command``."""

    async def launch(self, spec: NodeSpec, ctx: LaunchContext) -> NodeHandle:
        """Start the command with the node's environment."""
        command = spec.config.get("command")
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) for part in command)
        ):
            raise LaunchError(
                f"node {spec.name}: config.command must be a non-empty list of strings, "
                f"got {command!r}"
            )
        extra_env = spec.config.get("env") or {}
        if not isinstance(extra_env, dict):
            raise LaunchError(f"node {spec.name}: config.env must be a mapping")
        health_subject = spec.config.get("health_subject")
        if health_subject is not None and not isinstance(health_subject, str):
            raise LaunchError(f"node {spec.name}: config.health_subject must be a string")
        env = inherited_environment()
        env.update({str(k): str(v) for k, v in extra_env.items()})
        env.update(NATS_URL=ctx.nats_url, TETHER_NODE=spec.name, TETHER_NODE_DIR=str(ctx.node_dir))
        try:
            proc = await spawn(command, env=env, log_path=ctx.node_dir / "node.log")
        except ComponentError as exc:
            raise LaunchError(f"node {spec.name}: {exc}") from exc
        return ProcessHandle(proc, ctx.nc, health_subject)


# kind → launcher. Kinds missing here are reported "no launcher for kind X yet".
LAUNCHERS: dict[str, Launcher] = {"service": ServiceLauncher()}
