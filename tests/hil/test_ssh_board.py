"""`hil`'s ssh target driving a whole board over real OpenSSH: this machine is the board.

The board is the virtual target's processes (a real `edge run` on a private
PulseAudio null sink, bridged through a cuttable relay to a real `home up` with
the scripted model server); hil reaches it only through sshd on loopback, as
it would a board on the bench. There is no systemd here, so the test's board
profile reads the edge's pidfile and log file instead of systemctl/journalctl.

Audio goes in acoustically (--acoustic: `paplay` on the board into the sink
its microphone records). The file spool (audio.input kind spool) needs the
edge's spool source, which arrives with branch firmware-edge; its test,
test_spool_injection_over_ssh, runs as soon as the edge accepts that kind.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest
import yaml

from hil.runner import run_suites
from hil.suites import build_suites
from hil.targets.address import SshAddress
from hil.targets.base import TargetContext
from hil.targets.home_side import HomeSide
from hil.targets.profile import load_profile
from hil.targets.ssh import SshBoard, SshBoardOptions
from hil.targets.sshlink import HostKeyPin
from hil.targets.virtual import DEFAULT_PHRASES, VirtualBoard
from hil.wait import STAGES
from tests.support.openssh import OpenSsh, openssh_server
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow
VERSION = "import importlib.metadata as m; print(m.version('tether'))"


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Understood."})


def _board_profile(board: VirtualBoard, pidfile: Path, path: Path) -> Path:
    """The stand-in board's profile: a pidfile and a log file where systemd would be."""
    pid = shlex.quote(str(pidfile))
    pulse = shlex.quote(board.pulse_server)
    log = shlex.quote(str(board.work_dir / "edge-run.log"))
    path.write_text(
        yaml.safe_dump(
            {
                "config": str(board.work_dir / "edge.yaml"),
                "service": "edge-run",
                "commands": {
                    "state": f"kill -0 $(cat {pid}) 2>/dev/null && echo active || echo inactive",
                    "restarts": "echo 0",
                    "pid": f"cat {pid}",
                    "logs": f"tail -n {{lines}} {log}",
                    "version": f"{shlex.quote(sys.executable)} -c {shlex.quote(VERSION)}",
                    "play": f"PULSE_SERVER={pulse} paplay --device tether_null {{wav}}",
                },
            }
        )
    )
    return path


def _ssh_board(
    sshd: OpenSsh, board: VirtualBoard, work: Path, *, acoustic: bool = True
) -> SshBoard:
    pidfile = work / "edge.pid"
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.write_text(f"{board.edge_pid}\n")
    options = SshBoardOptions(
        key=sshd.client_key,
        pin=HostKeyPin(known_hosts=sshd.known_hosts),
        profile=load_profile(_board_profile(board, pidfile, work / "profile.yaml")),
        home=HomeSide(board.data_dir),
        acoustic=acoustic,
        relay=board.relay,
        phrases=DEFAULT_PHRASES,
    )
    return SshBoard(SshAddress("root", "127.0.0.1", sshd.port), work, options)


async def test_a_board_over_ssh_passes_smoke_turn_and_linkdrop_then_fails_when_broken(
    tmp_path: Path,
) -> None:
    async with (
        ScriptedModel(responder=_speak) as model,
        openssh_server(tmp_path / "sshd") as sshd,
        VirtualBoard(tmp_path / "board", home_args=("--llm-url", model.url)) as board,
    ):
        remote = _ssh_board(sshd, board, tmp_path / "hil")
        async with remote, remote.watch() as home:
            assert remote.exact_text  # the board's edge.yaml has the phrase grammar
            ctx = TargetContext(remote, home, tmp_path / "hil", turn_timeout_s=60)
            suites = build_suites(["smoke", "turn", "linkdrop"], DEFAULT_PHRASES)
            healthy = await run_suites("ssh", suites, ctx, remote.logs)

            half = board.board_dir / "board.edge.yaml"
            tampered = yaml.safe_load(half.read_text())
            tampered["limits"]["outbox_events"] = 7
            half.write_text(yaml.safe_dump(tampered))
            mismatched = await run_suites("ssh", build_suites(["smoke"], ()), ctx, remote.logs)

            assert board.edge_pid is not None
            os.kill(board.edge_pid, signal.SIGKILL)
            async with asyncio.timeout(10):
                while board.edge_pid is not None:
                    await asyncio.sleep(0.05)
            dead = await run_suites("ssh", build_suites(["smoke"], ()), ctx, remote.logs)
        sshd_log = sshd.log.read_text()

    verdicts = {f"{c.suite}/{c.name}": (c.verdict, c.reason) for c in healthy.cases}
    assert healthy.ok, verdicts
    measured = {m.name for c in healthy.cases for m in c.measurements}
    assert {"edge_restarts", "clock_skew_s", "disk_free_mb", "link_recovered_ms"} <= measured
    stages = {m.stage for c in healthy.cases if c.suite == "turn" for m in c.measurements}
    # The wait by stage (hil/wait.py); queue and recall need the memory schema.
    assert stages == set(STAGES) - {"queue", "recall"} | {None}
    assert "Accepted publickey for root" in sshd_log

    by_case = {c.name: c for c in mismatched.cases}
    assert by_case["versions_and_half_match"].verdict == "fail"
    assert "pair the board again" in by_case["versions_and_half_match"].reason
    assert by_case["services_up"].verdict == "pass"

    services = {c.name: c for c in dead.cases}["services_up"]
    assert services.verdict == "fail"
    assert "'edge-run': 'inactive'" in services.reason
    assert "edge-run.log" in services.logs  # the board's log, fetched over SSH


async def test_spool_injection_over_ssh(tmp_path: Path) -> None:
    async with (
        ScriptedModel(responder=_speak) as model,
        openssh_server(tmp_path / "sshd") as sshd,
        VirtualBoard(
            tmp_path / "board", home_args=("--llm-url", model.url), audio="spool"
        ) as board,
    ):
        remote = _ssh_board(sshd, board, tmp_path / "hil", acoustic=False)
        async with remote, remote.watch() as home:
            ctx = TargetContext(remote, home, tmp_path / "hil", turn_timeout_s=60)
            result = await run_suites(
                "ssh", build_suites(["turn"], ("안녕하세요",)), ctx, remote.logs
            )
            outputs = await remote.playbacks()
    verdicts = {c.name: (c.verdict, c.reason) for c in result.cases}
    assert result.ok, verdicts
    done = [p.name for p in (board.spool_in / "done").iterdir()]
    assert len(done) == 1 and done[0].startswith("hil-0001-") and done[0].endswith(".wav")
    assert not (board.spool_in / "rejected").exists() or not any(
        (board.spool_in / "rejected").iterdir()
    )
    assert outputs is not None and outputs >= 1
