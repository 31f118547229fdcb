"""Fixtures for JMFTS: the exported embedder, and real servers on port 0 in temp dirs.

Servers run as subprocesses (``python -m home.jmfts serve --port 0 --json``) so the sync
reference clients can call them and so kill -9 is a real kill. Every wait has a timeout;
every process is terminated in ``finally``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.onnx_export import export

START_TIMEOUT_S = 60.0


@pytest.fixture(scope="session")
def onnx_cache() -> Path:
    """The exported graph (exported once per environment; a no-op when cached)."""
    return export()


@pytest.fixture(scope="session")
def embedder(onnx_cache: Path) -> OnnxMiniLM:
    """The real embedder, shared by the in-process store tests."""
    return OnnxMiniLM(onnx_cache)


@dataclass
class ServerProcess:
    """A running ``home jmfts serve`` subprocess."""

    data_dir: Path
    process: subprocess.Popen[str]
    info: dict[str, Any]
    stderr_lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return str(self.info["url"])

    @property
    def admin_token(self) -> str:
        return (self.data_dir / "admin.token").read_text().strip()

    def client(self, token: str | None = None) -> httpx.Client:
        """An httpx client bearing ``token`` (the admin's by default; "" for none)."""
        bearer = self.admin_token if token is None else token
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)

    def kill9(self) -> None:
        """SIGKILL: no shutdown path runs."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def start_server(data_dir: Path, *extra: str) -> ServerProcess:
    """Start a server on a free loopback port; return once it has printed its address."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "home.jmfts",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--json",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    line: list[str] = []
    reader = threading.Thread(
        target=lambda: line.append(process.stdout.readline() if process.stdout else ""),
        daemon=True,
    )
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not line or not line[0].strip():
        process.kill()
        _, err = process.communicate(timeout=10)
        raise RuntimeError(f"jmfts server did not start: {err[-2000:]}")
    server = ServerProcess(data_dir, process, json.loads(line[0]))
    # Drain stderr so a chatty server can never block on a full pipe.
    threading.Thread(
        target=lambda: server.stderr_lines.extend(process.stderr or []), daemon=True
    ).start()
    return server


@pytest.fixture
def server_factory(tmp_path: Path, onnx_cache: Path) -> Iterator[Any]:
    """Start servers on demand (same or new data dirs); all are stopped at teardown."""
    started: list[ServerProcess] = []

    def make(data_dir: Path | None = None, *extra: str) -> ServerProcess:
        server = start_server(data_dir or tmp_path / f"jmfts-{len(started)}", *extra)
        started.append(server)
        return server

    try:
        yield make
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def server(server_factory: Any) -> ServerProcess:
    """One fresh server."""
    result: ServerProcess = server_factory()
    return result


@pytest.fixture(scope="module")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory, onnx_cache: Path
) -> Iterator[ServerProcess]:
    """One server for a whole module (tests that only add their own documents)."""
    server = start_server(tmp_path_factory.mktemp("jmfts-shared"))
    try:
        yield server
    finally:
        server.stop()
