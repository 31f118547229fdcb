"""`hil` against the virtual target: real home up, real edge run on a null sink, real bridge.

The model is the scripted OpenAI-compatible server (the one test double); the
rest is real. A healthy virtual board passes smoke, turn and linkdrop; a
broken one fails the case that names its fault, with a readable reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from hil.report import write_reports
from hil.runner import run_suites
from hil.suites import build_suites
from hil.targets import virtual
from hil.targets.base import TargetContext
from hil.targets.virtual import DEFAULT_PHRASES, VirtualBoard
from hil.wait import STAGES
from hil.wait import TOTAL as WAIT
from shared.proc import free_port
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Understood."})


async def test_a_healthy_virtual_board_passes_smoke_turn_and_linkdrop(tmp_path: Path) -> None:
    async with ScriptedModel(responder=_speak) as model:
        board = VirtualBoard(tmp_path / "run", home_args=("--llm-url", model.url))
        async with board, board.watch() as home:
            suites = build_suites(["smoke", "turn", "linkdrop"], DEFAULT_PHRASES)
            ctx = TargetContext(board, home, tmp_path / "run", turn_timeout_s=60)
            result = await run_suites("virtual", suites, ctx, board.logs)
    verdicts = {f"{c.suite}/{c.name}": (c.verdict, c.reason) for c in result.cases}
    assert result.ok, verdicts
    turn_stages = {m.stage for c in result.cases if c.suite == "turn" for m in c.measurements}
    # Every stage of the wait is traced on one machine (home's recall needs the memory schema).
    assert turn_stages == set(STAGES) - {"queue", "recall"} | {None}
    waits = result.turn_waits()
    assert len(waits) == len(DEFAULT_PHRASES)
    for wait in waits:
        stages = sum(v for k, v in wait.items() if k != WAIT)
        assert stages == pytest.approx(wait[WAIT], abs=1.0)

    paths = write_reports(result, tmp_path / "out")
    suites_el = ET.parse(paths["junit"]).getroot().findall("testsuite")
    assert [s.get("name") for s in suites_el] == ["smoke", "turn", "linkdrop"]
    assert all(s.get("failures") == "0" for s in suites_el)
    doc = json.loads(paths["json"].read_text())
    assert doc["ok"] is True
    assert doc["turn_wait"][WAIT]["n"] == len(DEFAULT_PHRASES)
    page = paths["html"].read_text()
    assert "<svg" in page and "Latency per stage" in page


async def test_a_broken_board_fails_the_case_that_names_its_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another program takes the bridge port between its pick and home up's bind: the
    # board is brought up again on fresh ports (the fault is the machine's, not the board's).
    with socket.create_server(("127.0.0.1", 0)) as taken:
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(virtual, "free_port", lambda: next(picks, None) or free_port())
        async with ScriptedModel(responder=_speak) as model:
            board = VirtualBoard(tmp_path / "run", home_args=("--llm-url", model.url))
            async with board, board.watch() as home:
                assert "address already in use" in (board.work_dir / "home-up.log").read_text()
                ctx = TargetContext(board, home, tmp_path / "run")
                smoke = build_suites(["smoke"], DEFAULT_PHRASES)

                half = board.board_dir / "board.edge.yaml"
                tampered = yaml.safe_load(half.read_text())
                tampered["limits"]["outbox_events"] = 7
                half.write_text(yaml.safe_dump(tampered))
                mismatched = await run_suites("virtual", smoke, ctx, board.logs)

                assert board.edge_pid is not None
                os.kill(board.edge_pid, signal.SIGKILL)
                async with asyncio.timeout(10):
                    while board.edge_pid is not None:
                        await asyncio.sleep(0.05)
                dead = await run_suites("virtual", smoke, ctx, board.logs)
        by_case = {c.name: c for c in mismatched.cases}
        assert by_case["versions_and_half_match"].verdict == "fail"
        assert "pair the board again" in by_case["versions_and_half_match"].reason
        assert by_case["services_up"].verdict == "pass"
        services = {c.name: c for c in dead.cases}["services_up"]
        assert services.verdict == "fail"
        assert "'edge': 'dead'" in services.reason
        assert "edge-run" in services.logs


async def test_a_board_pinning_the_wrong_host_key_fails_bridge_connected(tmp_path: Path) -> None:
    async with ScriptedModel(responder=_speak) as model:
        board = VirtualBoard(
            tmp_path / "run", home_args=("--llm-url", model.url), wrong_host_key=True
        )
        async with board, board.watch() as home:
            ctx = TargetContext(board, home, tmp_path / "run")
            result = await run_suites("virtual", build_suites(["smoke"], ()), ctx, board.logs)
    connected = {c.name: c for c in result.cases}["bridge_connected"]
    assert connected.verdict == "fail"
    assert "link to home up" in connected.reason
    assert "host key" in connected.logs.lower()


def test_hil_run_cli_refuses_unknown_suites_and_targets() -> None:
    exe = str(Path(sys.executable).with_name("hil"))
    bad_suite = subprocess.run(
        [exe, "run", "--target", "virtual", "--suite", "smoke,nap"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad_suite.returncode == 2
    assert "nap" in bad_suite.stderr
    bad_target = subprocess.run(
        [exe, "run", "--target", "ftp://board", "--suite", "smoke"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad_target.returncode == 2
    assert "not supported" in bad_target.stderr
