"""``home up`` as a process for tests: started on a data directory, stopped for sure.

The language model is whatever ``llm_url`` serves (the scripted test double, in most
tests), or the embedded model when it is None. The block starts once every applied
schema is active and every node runs, so a turn sent next is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from nats.errors import Error as NatsError

from home.substrate.client import HomeClient
from shared import control
from shared.bus_credentials import home_admin_url
from shared.errors import ControlError, HomeNotRunning

# The embedded model loads before its agent reports running.
START_TIMEOUT_S = 180.0


async def home_status(data_dir: Path, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """What ``home status --json --data-dir DATA_DIR`` prints, or None while home cannot
    say: the same control request, asked from this process, so a test that polls does
    not start a Python interpreter for every look."""
    try:
        async with HomeClient(data_dir, timeout_s=timeout_s) as home:
            result: dict[str, Any] = await home.request(control.STATUS)
    except (HomeNotRunning, ControlError, NatsError, OSError, TimeoutError):
        return None
    return result


class RunningHome:
    """`home up` as a child process, its data directory, and its NATS URL once up."""

    def __init__(self, proc: asyncio.subprocess.Process, data_dir: Path) -> None:
        self.proc = proc
        self.data_dir = data_dir
        self.nats_url = ""

    async def cli(self, *args: str) -> tuple[int, str]:
        """``home ARGS --data-dir DATA_DIR``: its exit code and output (stderr included)."""
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "home.cli", *args, "--data-dir", str(self.data_dir),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await run.communicate()
        return run.returncode or 0, out.decode()

    def server_log(self) -> str:
        """What home's nats-server has logged so far."""
        return (self.data_dir / "nats" / "nats-server.log").read_text(encoding="utf-8")

    async def status(self) -> dict[str, Any] | None:
        """``home status --json``, or None while home cannot say (:func:`home_status`)."""
        return await home_status(self.data_dir)

    async def ready(self) -> bool:
        """Every applied schema active and every node running."""
        status = await self.status()
        if not status or not status.get("schemas"):
            return False
        return all(s["state"] == "active" for s in status["schemas"]) and all(
            n["state"] == "running" for n in status.get("nodes", [])
        )


@contextlib.asynccontextmanager
async def running_home(
    data_dir: Path,
    llm_url: str | None,
    *,
    bridge_port: int = 0,
    apply: Sequence[str] = ("edge_asr",),
) -> AsyncIterator[RunningHome]:
    """`home up` on ``data_dir`` until the block ends; its log is ``DATA_DIR/../home-up.log``."""
    log = (data_dir.parent / "home-up.log").open("ab")
    model = ["--llm-url", llm_url] if llm_url is not None else []
    applied = [arg for name in apply for arg in ("--apply", name)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "up", "--json", "--data-dir", str(data_dir),
        "--bridge-port", str(bridge_port), *model, *applied, stdout=log, stderr=log,
    )  # fmt: skip
    home = RunningHome(proc, data_dir)
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while not await home.ready():
                assert proc.returncode is None, (data_dir.parent / "home-up.log").read_text()
                await asyncio.sleep(0.5)
        # As the home's admin bus user, the way the CLI connects.
        home.nats_url = home_admin_url(
            data_dir, json.loads((data_dir / "home.json").read_text())["nats_url"]
        )
        yield home
        # Everything the block made home do stayed within each node's bus rights.
        refused = [line for line in home.server_log().splitlines() if "Violation" in line]
        assert not refused, "nats-server refused:\n" + "\n".join(refused)
    finally:
        try:
            if proc.returncode is None:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), 60)  # home must stop; a hang fails
        finally:
            if proc.returncode is None:  # but a failure leaves nothing behind
                proc.kill()
                await proc.wait()
            log.close()
