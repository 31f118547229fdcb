"""A real nats-server on loopback, started and stopped around a block (blocking)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

from shared.proc import free_port, nats_server_binary, terminate_blocking, wait_for_port_blocking


@contextlib.contextmanager
def loopback_nats_server(*args: str, port: int | None = None) -> Iterator[str]:
    """nats-server on 127.0.0.1 with ``args`` (``-js``, ``-c FILE``, ...); yields its URL."""
    port = port or free_port()
    proc = subprocess.Popen(
        [nats_server_binary(), "-a", "127.0.0.1", "-p", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port_blocking("127.0.0.1", port, timeout_s=10, exit_code=proc.poll)
        yield f"nats://127.0.0.1:{port}"
    finally:
        terminate_blocking(proc)
