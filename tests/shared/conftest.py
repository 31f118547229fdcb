"""A real nats-server on a free loopback port, for the tests of the wire contract."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from shared.proc import free_port, nats_server_binary, terminate_blocking, wait_for_port_blocking


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    """Start a real nats-server on 127.0.0.1 for the session; yield its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port_blocking("127.0.0.1", port, timeout_s=10, exit_code=proc.poll)
        yield f"nats://127.0.0.1:{port}"
    finally:
        terminate_blocking(proc)
