"""``home up`` as a process tree whose plug a test can pull: every process stopped, then killed.

A power cut gives no process a last word. SIGKILL of ``home up`` alone would not do:
its children die of ``PR_SET_PDEATHSIG`` with SIGTERM (``shared/proc.py``) and stop
cleanly, and the agent nodes and τ run in sessions of their own. So the tree is first
frozen (SIGSTOP to home up's process group and to every descendant found by walking
``/proc``, again until no new one appears; a stopped process cannot fork), and only
then is every frozen process sent SIGKILL, which a stopped process cannot handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import psutil

from shared.bus_credentials import home_admin_url
from tests.support.home_up import START_TIMEOUT_S, RunningHome

# How long the killed processes may take to disappear from /proc.
GONE_TIMEOUT_S = 30.0


def _tree(leader: int, pgid: int) -> set[int]:
    """The leader, its descendants and every process of its group, as /proc has them now."""
    found = {leader}
    with contextlib.suppress(psutil.NoSuchProcess):
        found |= {p.pid for p in psutil.Process(leader).children(recursive=True)}
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(proc.pid) == pgid:
                found.add(proc.pid)
    return found


def _signal_each(pids: set[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def pull_the_plug(leader: int) -> set[int]:
    """Freeze ``leader``'s whole tree, then SIGKILL all of it; return the pids killed.

    ``leader`` must lead its own process group (started with ``start_new_session``).
    """
    pgid = leader
    frozen: set[int] = set()
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGSTOP)
        found = set().union(*(_tree(pid, pgid) for pid in frozen | {leader}))
        fresh = found - frozen
        if not fresh:
            break
        _signal_each(fresh, signal.SIGSTOP)
        frozen |= fresh
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    _signal_each(frozen, signal.SIGKILL)
    return frozen


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def all_gone(pids: set[int]) -> None:
    """Wait until none of ``pids`` runs any more."""
    async with asyncio.timeout(GONE_TIMEOUT_S):
        while alive := {pid for pid in pids if _alive(pid)}:
            await asyncio.sleep(0.1)
    assert not alive


@contextlib.asynccontextmanager
async def pluggable_home(
    data_dir: Path, llm_url: str, *, apply: Sequence[str] = ("edge_asr",)
) -> AsyncIterator[RunningHome]:
    """`home up` on ``data_dir`` in a process group of its own, ready for its first turn.

    Its log is ``DATA_DIR/../home-up.log``. Whatever of it still runs when the block
    ends has its plug pulled, so a failing test leaves nothing behind.
    """
    log = (data_dir.parent / "home-up.log").open("ab")
    applied = [arg for name in apply for arg in ("--apply", name)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "up", "--json", "--data-dir", str(data_dir),
        "--bridge-port", "0", "--llm-url", llm_url, *applied,
        stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    home = RunningHome(proc, data_dir)
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while not await home.ready():
                assert proc.returncode is None, (data_dir.parent / "home-up.log").read_text()
                await asyncio.sleep(0.5)
        home.nats_url = home_admin_url(
            data_dir, json.loads((data_dir / "home.json").read_text())["nats_url"]
        )
        yield home
    finally:
        try:
            if proc.returncode is None:
                await all_gone(pull_the_plug(proc.pid))
        finally:
            await proc.wait()
            log.close()
