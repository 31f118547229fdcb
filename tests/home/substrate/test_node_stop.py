"""A node's supervisor stops when it is told to, even when its bus connection is closing.

nats-py turns a cancel that lands in ``next_msg`` on a closed connection into
``ConnectionClosedError``. A health check that read that as "unhealthy" carried on, so
``NodeRunner.stop`` waited forever for its loop, and ``home up`` did not stop (seen in
cold CI runs: ``SchemaRuntime.close`` hung in ``NodeRunner.stop``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from home.substrate.launchers import LaunchContext, ProcessHandle, ServiceLauncher
from home.substrate.nodes import NodeRunner
from home.substrate.process import spawn
from shared.nats_confirm import confirm_subscriptions
from shared.schema import NodeSpec


async def test_a_health_check_cancelled_as_the_bus_closes_stays_cancelled(
    nats_url: str, tmp_path: Path
) -> None:
    nc = await nats.connect(nats_url)
    silent = await nats.connect(nats_url)  # takes the health subject and never answers
    proc = await spawn(["sleep", "60"], env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log")
    handle = ProcessHandle(proc, nc, "node.silent.health")
    try:
        await silent.subscribe("node.silent.health")
        await confirm_subscriptions(silent)
        check = asyncio.create_task(handle.health())
        await asyncio.sleep(0.3)  # waiting in next_msg for an answer that never comes
        check.cancel()
        await nc.close()  # closed before the check sees its cancel
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(check, 5)
    finally:
        await handle.close()
        await silent.close()


async def test_stop_ends_the_supervising_loop_even_when_a_cancel_is_swallowed(
    nats_url: str, tmp_path: Path
) -> None:
    swallowed = 0

    async def on_change(runner: NodeRunner) -> None:
        # As nats-py's publish does when a cancel lands in its flush: it goes on.
        nonlocal swallowed
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            swallowed += 1

    spec = NodeSpec(
        name="svc.sleeper", kind="service", runs_on="home", publishes=(), subscribes=(),
        config={"command": ["sleep", "60"]},
    )  # fmt: skip
    nc = await nats.connect(nats_url)
    try:
        ctx = LaunchContext(nats_url=nats_url, nc=nc, node_dir=tmp_path / "node")
        runner = NodeRunner(spec, ServiceLauncher(), ctx, on_change)
        await runner.start()
        await asyncio.sleep(0.1)  # inside on_change, starting
        stopping = asyncio.create_task(runner.close())
        # Nothing but stop itself may end the loop (an outside cancel of stop would).
        done, _ = await asyncio.wait({stopping}, timeout=10)
        assert done, "stop never ended: the supervising loop outlived its one cancel"
    finally:
        for task in asyncio.all_tasks():
            if task.get_name() == "node svc.sleeper":
                task.cancel()
        await nc.close()
    assert swallowed >= 1, "the first cancel landed in on_change and was swallowed"
    assert runner.state == "stopped" and runner.pid is None
