"""Fixtures every test package shares: a real nats-server for the session, the board image."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from shared.proc import free_port, nats_server_binary, terminate_blocking, wait_for_port_blocking
from tests.support import hypothesis_profiles
from tests.support.board_image import BuiltQemuImage, build_qemu_image

# Before any test module builds its @settings: they inherit what they leave unnamed.
hypothesis_profiles.load()


@pytest.fixture(scope="session")
def built_qemu_image(tmp_path_factory: pytest.TempPathFactory) -> BuiltQemuImage:
    """A ``qemu`` board image, built once per session (see tests/support/board_image.py).

    Slow: about a minute warm, plus the base system on a cold cache. Paired with
    a home at ``127.0.0.1:home_port`` that nobody runs until a test does.
    """
    return build_qemu_image(tmp_path_factory.mktemp("qemu-image"))


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
