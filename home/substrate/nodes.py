"""Supervision of one node under its ``restart_policy``.

A :class:`NodeRunner` starts its node through the launcher of its kind, waits
for it to become healthy, watches it (exit or failing health checks), and
restarts it with exponential backoff from ``backoff_s`` up to
``backoff_max_s``. More than ``max_restarts`` failures within ``window_s``
puts the node in state ``failed`` (its schemas become degraded); it is then
retried every ``backoff_max_s``, and once healthy again it is ``running`` (its
schemas are restored). A kind without a launcher is ``unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from home.substrate.errors import LaunchError
from home.substrate.launchers import LaunchContext, Launcher, NodeHandle
from shared.lifecycle import cancel_and_wait
from shared.schema import NodeSpec

log = logging.getLogger(__name__)

STARTING, RUNNING, BACKOFF, FAILED, UNAVAILABLE, STOPPED = (
    "starting",
    "running",
    "backoff",
    "failed",
    "unavailable",
    "stopped",
)
# States in which a node's schemas are degraded.
DEGRADING_STATES = (FAILED, UNAVAILABLE)
DEFAULT_READY_TIMEOUT_S = 10.0
# Consecutive failed health checks before a running node is restarted.
HEALTH_FAILURES_TO_RESTART = 3
# How long stop waits on a cancelled supervising loop before cancelling it again.
RECANCEL_AFTER_S = 1.0


@dataclass(frozen=True)
class NodeView:
    """One node as `home status` shows it."""

    name: str
    kind: str
    state: str
    reason: str
    pid: int | None
    restarts: int
    last_error: str | None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return dict(self.__dict__)


NodeCallback = Callable[["NodeRunner"], Awaitable[None]]


class NodeRunner:
    """Runs and supervises one node; :meth:`start` and :meth:`close` bound its life."""

    def __init__(
        self,
        spec: NodeSpec,
        launcher: Launcher | None,
        ctx: LaunchContext,
        on_change: NodeCallback,
        health_interval_s: float = 1.0,
    ) -> None:
        self.spec = spec
        self._launcher = launcher
        self._ctx = ctx
        self._on_change = on_change
        self._health_interval_s = health_interval_s
        self.state = STOPPED
        self.reason = ""
        self.restarts = 0
        self.last_error: str | None = None
        self._handle: NodeHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def view(self) -> NodeView:
        """The node's current state."""
        return NodeView(
            name=self.spec.name,
            kind=self.spec.kind,
            state=self.state,
            reason=self.reason,
            pid=self._handle.pid if self._handle is not None else None,
            restarts=self.restarts,
            last_error=self.last_error,
        )

    @property
    def pid(self) -> int | None:
        """The running node's pid, if any."""
        return self._handle.pid if self._handle is not None else None

    def kill(self) -> None:
        """SIGKILL the node's process group at once, without the grace :meth:`close`
        gives (a fenced member's nodes, docs/architecture.md "Growing past one machine");
        :meth:`close` follows."""
        pid = self.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    async def start(self) -> None:
        """Begin running the node in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"node {self.spec.name}")

    async def close(self) -> None:
        """Stop supervising and terminate the node.

        The loop is cancelled again until it ends: nats-py swallows a cancel that lands in
        a publish's flush (a state change is published), so one cancel could leave it
        running and ``home up`` unable to stop.
        """
        task, self._task = self._task, None
        if task is not None:
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=RECANCEL_AFTER_S)
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._set(STOPPED, "")

    async def _set(self, state: str, reason: str, error: str | None = None) -> None:
        if error is not None:
            self.last_error = error
        if (state, reason) == (self.state, self.reason):
            return
        self.state, self.reason = state, reason
        log.info("node %s: %s %s", self.spec.name, state, reason)
        await self._on_change(self)

    async def _run(self) -> None:
        if self._launcher is None:
            await self._set(UNAVAILABLE, f"no launcher for kind {self.spec.kind} yet")
            return
        policy = self.spec.restart_policy
        failures: deque[float] = deque()
        while True:
            await self._set(STARTING, "starting" if not failures else self.reason)
            error = await self._run_once(self._launcher)
            now = time.monotonic()
            failures.append(now)
            while failures and failures[0] < now - policy.window_s:
                failures.popleft()
            self.restarts += 1
            if len(failures) > policy.max_restarts:
                delay = policy.backoff_max_s
                await self._set(
                    FAILED,
                    f"exceeded restart policy ({len(failures)} failures in "
                    f"{policy.window_s:g} s, max {policy.max_restarts}); last: {error}; "
                    f"retrying every {delay:g} s",
                    error,
                )
            else:
                delay = min(policy.backoff_s * 2 ** (len(failures) - 1), policy.backoff_max_s)
                await self._set(BACKOFF, f"restarting in {delay:g} s after: {error}", error)
            await asyncio.sleep(delay)

    async def _run_once(self, launcher: Launcher) -> str:
        """Start, await health, watch; return why this run ended."""
        try:
            self._handle = await launcher.launch(self.spec, self._ctx)
        except LaunchError as exc:
            return str(exc)
        try:
            problem = await self._await_ready(self._handle)
            if problem is not None:
                return problem
            await self._set(RUNNING, "")
            return await self._watch(self._handle)
        finally:
            await self._handle.close()
            self._handle = None

    async def _await_ready(self, handle: NodeHandle) -> str | None:
        timeout = float(self.spec.config.get("ready_timeout_s", DEFAULT_READY_TIMEOUT_S))
        deadline = time.monotonic() + timeout
        while True:
            health = await handle.health()
            if health.ok:
                return None
            if time.monotonic() > deadline:
                return f"not healthy within {timeout:g} s of start: {health.detail}"
            await asyncio.sleep(0.05)

    async def _watch(self, handle: NodeHandle) -> str:
        exited = asyncio.create_task(handle.wait())
        try:
            bad = 0
            while True:
                done, _ = await asyncio.wait({exited}, timeout=self._health_interval_s)
                if done:
                    return f"exited with code {exited.result()}"
                health = await handle.health()
                bad = 0 if health.ok else bad + 1
                if bad >= HEALTH_FAILURES_TO_RESTART:
                    return f"failed {bad} health checks: {health.detail}"
        finally:
            await cancel_and_wait(exited)
