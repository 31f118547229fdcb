"""The board's preflight stand-in: READY=1 on a real NOTIFY_SOCKET only when every check passes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HALF = REPO / "schemas/bridge/tui.edge.yaml"


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    try:
        yield sock, path
    finally:
        sock.close()


def _start(config: Path, notify: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NOTIFY_SOCKET": notify, "WATCHDOG_USEC": "200000"}
    return subprocess.Popen(
        [sys.executable, "-m", "firmware.board_preflight", "--config", str(config)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ready_then_watchdog_then_clean_stop(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, path = notify_socket
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "tui.edge.key").write_text("private\n")
    os.chmod(keys / "tui.edge.key", 0o600)
    config = tmp_path / "edge.yaml"
    config.write_text(f"device: tui\nbridge: {{half: {HALF}, secrets: {keys}}}\n")
    process = _start(config, path)
    try:
        ready = sock.recv(4096).decode()
        assert ready.startswith("READY=1\n")
        assert "bridge half" in ready and "board key 0600" in ready
        assert sock.recv(4096) == b"WATCHDOG=1"
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
        assert process.returncode == 0
        assert "tether preflight: device tui: config ok" in out
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize(
    ("config_text", "key_mode", "message"),
    [
        ("device: Not A Token\n", None, "device"),
        ("device: board\nbridge: {{half: {half}}}\n", None, "expected the edge half of 'board'"),
        ("device: tui\nbridge: {{half: {half}, secrets: {keys}}}\n", 0o644, "must be 0600"),
        ("device: tui\nbridge: {{half: /nonexistent.yaml}}\n", None, "nonexistent"),
    ],
)
def test_failed_checks_never_report_ready(
    tmp_path: Path,
    notify_socket: tuple[socket.socket, str],
    config_text: str,
    key_mode: int | None,
    message: str,
) -> None:
    sock, path = notify_socket
    keys = tmp_path / "keys"
    keys.mkdir()
    if key_mode is not None:
        (keys / "tui.edge.key").write_text("private\n")
        os.chmod(keys / "tui.edge.key", key_mode)
    config = tmp_path / "edge.yaml"
    config.write_text(config_text.format(half=HALF, keys=keys))
    process = _start(config, path)
    try:
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1
    assert message in err
    sock.settimeout(0.1)
    with pytest.raises(TimeoutError):
        sock.recv(4096)
