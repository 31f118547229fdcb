"""`home up` as a real process: starts, is found through --data-dir, refuses a twin, stops clean."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.home.substrate.conftest import alive, write_home_files

pytestmark = pytest.mark.slow
WAIT_S = 20.0


def wait_until(predicate: Any, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def home_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "home.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class HomeProcess:
    """A `home up` child process and its data dir."""

    def __init__(self, root: Path) -> None:
        self.catalog, self.schema_dir = write_home_files(root / "schemas")
        self.data_dir = root / "data"
        self.log = root / "home-up.log"
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *extra: str) -> subprocess.Popen[str]:
        with self.log.open("a") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "home.cli",
                    "up",
                    "--json",
                    "--data-dir",
                    str(self.data_dir),
                    "--catalog",
                    str(self.catalog),
                    "--schema-dir",
                    str(self.schema_dir),
                    # The substrate alone: no model, no memory server.
                    "--llm-url",
                    "none",
                    "--no-memory",
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        self.procs.append(proc)
        wait_until(
            lambda: (self.data_dir / "home.json").exists() or proc.poll() is not None, "home.json"
        )
        assert proc.poll() is None, self.log.read_text()
        return proc

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return home_cli(*args, "--data-dir", str(self.data_dir))

    def status(self) -> dict[str, Any]:
        result = self.cli("status", "--json")
        assert result.returncode in (0, 1), result.stderr
        status: dict[str, Any] = json.loads(result.stdout)
        return status

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(WAIT_S)


@pytest.fixture
def home_process(tmp_path: Path) -> Iterator[HomeProcess]:
    home = HomeProcess(tmp_path)
    try:
        yield home
    finally:
        home.stop()


def child_pids(home: HomeProcess) -> list[int]:
    status = home.status()
    pids = [c["pid"] for c in status["components"] if c["name"] != "substrate" and c["pid"]]
    return pids + [n["pid"] for n in status["nodes"] if n["pid"]]


def test_up_status_refuse_twin_and_sigterm_leaves_nothing(home_process: HomeProcess) -> None:
    proc = home_process.start()
    status = home_process.status()
    components = {c["name"]: c for c in status["components"]}
    assert components["nats-server"]["state"] == "healthy"
    assert components["nats-server"]["address"].startswith("nats://127.0.0.1:")
    assert components["substrate"]["state"] == "healthy"
    assert components["substrate"]["pid"] == proc.pid

    applied = home_process.cli("schema", "apply", str(home_process.schema_dir / "talk.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert "applied talk: active" in applied.stdout
    wait_until(
        lambda: {n["state"] for n in home_process.status()["nodes"]} == {"running"},
        "talk's nodes to run",
    )
    pids = child_pids(home_process)
    assert len(pids) == 3 and all(alive(pid) for pid in pids)

    refused = home_process.cli("schema", "apply", "rival")
    assert refused.returncode == 1
    assert "overlap" in refused.stderr and "'rival'" in refused.stderr
    assert "'talk'" in refused.stderr and "events.workspace.*.out.>" in refused.stderr
    unknown = home_process.cli("schema", "apply", "nope")
    assert unknown.returncode == 2 and "no activation schema named 'nope'" in unknown.stderr

    twin = home_cli("up", "--data-dir", str(home_process.data_dir))
    assert twin.returncode == 1
    assert "already running" in twin.stderr and str(proc.pid) in twin.stderr

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(WAIT_S) == 0
    # --json: every line it wrote is a JSON object; one says it was ready, one that it stopped.
    records = [json.loads(line) for line in home_process.log.read_text().splitlines()]
    assert any(r.get("event") == "ready" for r in records)
    assert any(r.get("message") == "component nats-server: stopped" for r in records)
    assert not any(alive(pid) for pid in pids)
    assert not (home_process.data_dir / "home.json").exists()
    gone = home_process.cli("status")
    assert gone.returncode == 1 and "no home is running" in gone.stderr

    # The next `home up` restores the schemas that were active.
    home_process.start()
    listed = json.loads(home_process.cli("schema", "list", "--json").stdout)
    assert [s["name"] for s in listed] == ["talk"]


def test_kill_9_of_home_up_takes_its_children_along(home_process: HomeProcess) -> None:
    proc = home_process.start("--apply", "notes")
    wait_until(lambda: any(n["pid"] for n in home_process.status()["nodes"]), "a node pid")
    pids = child_pids(home_process)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(WAIT_S)
    # Each child gets SIGTERM from the kernel and stops as on a clean stop (an agent node
    # closes its τ): on a loaded machine that can take longer than a start does.
    try:
        wait_until(lambda: not any(alive(pid) for pid in pids), "the children to die", 3 * WAIT_S)
    except pytest.fail.Exception:
        left = {}
        for pid in filter(alive, pids):
            with contextlib.suppress(OSError):  # it may go while we look
                left[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        pytest.fail(f"still alive after home up was killed: {left}")


def test_cli_usage_errors(tmp_path: Path) -> None:
    nothing = home_cli("status", "--data-dir", str(tmp_path / "none"))
    assert nothing.returncode == 1 and "no home is running on" in nothing.stderr
    assert home_cli("schema", "frobnicate").returncode == 2
    helped = home_cli("--help")
    assert helped.returncode == 0
    for command in ("up", "status", "schema", "events", "trace"):
        assert command in helped.stdout


def test_up_refuses_to_start_with_an_unknown_schema_and_leaves_nothing(tmp_path: Path) -> None:
    catalog, schema_dir = write_home_files(tmp_path / "schemas")
    data_dir = tmp_path / "data"
    failed = home_cli(
        "up", "--data-dir", str(data_dir), "--catalog", str(catalog),
        "--schema-dir", str(schema_dir), "--apply", "nope",
    )  # fmt: skip
    assert failed.returncode == 2
    assert "cannot apply schema 'nope' at start" in failed.stderr
    assert "known: broken, ghost, mute, notes, rival, talk" in failed.stderr
    assert not (data_dir / "home.json").exists()
    # nats-server had started (its log names its pid) and was stopped again.
    log = (data_dir / "nats" / "nats-server.log").read_text()
    started = re.search(r"^\[(\d+)\] .*Starting nats-server", log, re.MULTILINE)
    assert started is not None, log
    assert not alive(int(started.group(1)))


def test_up_names_the_file_and_line_of_a_broken_catalog(tmp_path: Path) -> None:
    catalog = tmp_path / "nodes.yaml"
    catalog.write_text("catalog: broken\nnodes:\n  svc.x:\n    kind: teapot\n")
    failed = home_cli("up", "--data-dir", str(tmp_path / "data"), "--catalog", str(catalog))
    assert failed.returncode == 2
    assert f"{catalog}:4" in failed.stderr and "teapot" in failed.stderr
