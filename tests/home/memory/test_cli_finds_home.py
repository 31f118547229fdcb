"""``home memory …`` finds the running home through --data-dir, like every ``home`` command.

The acceptance runs the real ``home up --data-dir D`` (tests.support.home_up; the scripted
model server stands in for the language model) and then, with no other step, writes and
searches its memory. The others check where the commands look when no home runs, and
calibrate's default.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from home.memory.cli import ledger_path
from home.substrate.config import default_data_dir
from tests.support.home_up import running_home
from tests.support.scripted_model import ScriptedModel

AGENT = "edge_asr_memory"
CLI_TIMEOUT_S = 120


def home_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "home.cli", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


@pytest.mark.slow
async def test_memory_put_and_search_find_the_home_that_runs_on_the_data_dir(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "home"
    async with ScriptedModel() as model, running_home(data_dir, model.url):
        put = await asyncio.to_thread(
            home_cli, "memory", "put", "--data-dir", str(data_dir), "workspace/a/b", "x"
        )
        assert put.returncode == 0, put.stderr
        found = await asyncio.to_thread(
            home_cli, "memory", "search", "--data-dir", str(data_dir), "x", "--json"
        )
        assert found.returncode == 0, found.stderr
        hits = {hit["path"]: hit for hit in json.loads(found.stdout)["results"]}
        assert hits["workspace/a/b"]["snippet"] == "x", hits


@pytest.mark.parametrize("command", [["put", "workspace/a/b", "x"], ["search", "x"], ["tree"]])
def test_without_a_running_home_the_error_names_the_data_dir_and_how_to_start_one(
    tmp_path: Path, command: list[str]
) -> None:
    data_dir = tmp_path / "nohome"
    result = home_cli("memory", *command, "--data-dir", str(data_dir))
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert str(data_dir) in line and f"home up --data-dir {data_dir}" in line


def test_without_data_dir_the_memory_commands_look_where_home_up_runs(tmp_path: Path) -> None:
    result = home_cli("memory", "search", "x", env={"TETHER_HOME_DIR": str(tmp_path / "th")})
    assert result.returncode == 1
    assert f"home up --data-dir {tmp_path / 'th'}" in result.stderr


def test_a_named_url_needs_no_running_home(tmp_path: Path) -> None:
    token = tmp_path / "admin.token"
    token.write_text("jm_1_nothing\n")
    result = home_cli(
        "memory", "get", "x", "--url", "http://127.0.0.1:9", "--token-file", str(token),
        "--data-dir", str(tmp_path / "nohome"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot reach" in result.stderr and "home up" not in result.stderr


SEARCHES = [
    {"kind": "search", "search_id": "s1", "threshold": 0.5, "hits": [
        {"id": 1, "score": 0.7, "passed": True}, {"id": 2, "score": 0.2, "passed": False}]},
    {"kind": "use", "search_id": "s1", "used_ids": [1], "unused_ids": []},
]  # fmt: skip


@pytest.mark.parametrize("variable", ["TETHER_HOME_DIR", "XDG_DATA_HOME"])
def test_calibrate_reads_the_ledger_under_the_default_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.delenv("TETHER_HOME_DIR", raising=False)
    monkeypatch.setenv(variable, str(tmp_path / "data"))
    ledger = ledger_path(default_data_dir(), AGENT)
    assert ledger.is_relative_to(tmp_path / "data")
    ledger.parent.mkdir(parents=True)
    ledger.write_text("".join(json.dumps(record) + "\n" for record in SEARCHES))
    result = home_cli("memory", "calibrate", AGENT, "--plot", str(tmp_path / "c.png"), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["searches"] == 1
