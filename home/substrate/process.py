"""Child processes of the home: spawned in their own session, tied to our life, and reaped.

Every child gets ``PR_SET_PDEATHSIG`` so that even a ``kill -9`` of ``home up``
leaves nothing running, and its own process group so that Ctrl-C in the
terminal reaches ``home up`` alone, which then stops the children in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
from collections.abc import Callable
from pathlib import Path

from home.substrate.errors import ComponentError

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that has the child killed when its parent dies (PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return preexec


async def spawn(
    argv: list[str], *, env: dict[str, str], log_path: Path, cwd: Path | None = None
) -> asyncio.subprocess.Process:
    """Start ``argv`` with stdout and stderr appended to ``log_path`` (private, 0600)."""
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a log an earlier run left
    with os.fdopen(fd, "ab") as log:
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )
        except OSError as exc:
            raise ComponentError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc


async def terminate(proc: asyncio.subprocess.Process, grace_s: float = 5.0) -> int:
    """SIGTERM the child's process group, SIGKILL it after ``grace_s``; return the exit code."""
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)
            await proc.wait()
    else:
        # The leader is gone; make sure nothing it forked lingers in its group.
        _signal_group(proc.pid, signal.SIGKILL)
    return proc.returncode if proc.returncode is not None else -1


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
