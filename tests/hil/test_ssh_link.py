"""The ssh target's parts against a real OpenSSH server: pinned host keys, key login, SFTP spool.

Fast: no board processes, only sshd on loopback. The whole board is driven
over SSH in test_ssh_board.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hil.runner import run_suites
from hil.suites import build_suites
from hil.targets.address import (
    BadTarget,
    QemuTarget,
    RelaySpec,
    SshAddress,
    VirtualTarget,
    parse_relay,
    parse_target,
)
from hil.targets.base import HomeWatch, TargetContext
from hil.targets.edge_view import EdgeConfigError, parse_edge_view
from hil.targets.profile import ProfileError, load_profile
from hil.targets.ssh import SshBoard, SshBoardOptions
from hil.targets.sshlink import HostKeyPin, SshLink
from tests.support.openssh import OpenSsh, keygen, openssh_server


def test_targets_parse_and_bad_ones_say_the_accepted_forms() -> None:
    assert parse_target("virtual") == VirtualTarget()
    assert parse_target("ssh://tether@board.lan") == SshAddress("tether", "board.lan", 22)
    assert parse_target("ssh://root@127.0.0.1:2222") == SshAddress("root", "127.0.0.1", 2222)
    assert parse_target("qemu:out/tui.img.zst") == QemuTarget(Path("out/tui.img.zst"))
    assert SshAddress("u", "h", 2222).known_hosts_name == "[h]:2222"
    assert parse_relay("0.0.0.0:2222=127.0.0.1:2223") == RelaySpec(
        "0.0.0.0", 2222, "127.0.0.1", 2223
    )
    for relay in ("2222", "0.0.0.0:2222=127.0.0.1", "h:0=h:1", ":1=h:2"):
        with pytest.raises(BadTarget, match="LISTEN_HOST:PORT=HOME_HOST:PORT"):
            parse_relay(relay)
    for bad, says in [
        ("ftp://board", "ssh://user@host"),
        ("ssh://board.lan", "expected ssh://user@host"),
        ("ssh://u:pw@board", "key only"),
        ("ssh://u@board:99999", "port"),
        ("qemu:", "needs an image"),
    ]:
        with pytest.raises(BadTarget, match=says):
            parse_target(bad)


def test_board_profile_defaults_to_systemd_and_a_file_overrides_single_commands(
    tmp_path: Path,
) -> None:
    default = load_profile()
    assert default.config == "/etc/tether/edge.yaml"
    assert default.command("state") == "systemctl is-active tether-edge"
    assert default.command("logs", lines=5).startswith("journalctl -u tether-edge")
    mine = tmp_path / "profile.yaml"
    mine.write_text("service: edge\ncommands:\n  state: echo active\n")
    overlaid = load_profile(mine)
    assert overlaid.command("state") == "echo active"
    assert overlaid.command("restarts") == "systemctl show -p NRestarts --value edge"
    mine.write_text("config: /etc/e.yaml\ncommands:\n  stat: echo active\n")
    with pytest.raises(ProfileError, match=r"profile.yaml:3: commands.stat: unknown key"):
        load_profile(mine)


def test_edge_view_reads_the_spool_folders_and_names_bad_keys() -> None:
    view = parse_edge_view(
        "device: kitchen\naudio:\n  input: {kind: spool, dir: /var/spool/in}\n"
        "  output: {kind: spool, dir: /var/spool/out}\nbridge: {half: /etc/tether/k.yaml}\n"
        "nats: {port: 4333}\nasr: {grammar: [안녕하세요, '[unk]']}\n",
        "board:/etc/tether/edge.yaml",
    )
    assert (view.device, view.input_dir, view.output_dir) == (
        "kitchen",
        "/var/spool/in",
        "/var/spool/out",
    )
    assert (view.half, view.nats_port) == ("/etc/tether/k.yaml", 4333)
    assert view.grammar == ("안녕하세요", "[unk]")
    plain = parse_edge_view("device: tui\n", "e.yaml")
    assert (plain.input_kind, plain.input_dir, plain.nats_port) == ("sounddevice", None, 0)
    assert plain.grammar == ()
    with pytest.raises(EdgeConfigError, match=r"e.yaml:2: nats.port: expected an integer"):
        parse_edge_view("device: tui\nnats: {port: four}\n", "e.yaml")


async def test_key_login_with_the_pinned_host_key_runs_commands_and_spools_atomically(
    tmp_path: Path,
) -> None:
    async with openssh_server(tmp_path / "sshd") as sshd:
        address = SshAddress("root", "127.0.0.1", sshd.port)
        pin = HostKeyPin(host_key=sshd.host_key_line)
        async with SshLink(address, sshd.client_key, pin) as link:
            assert (await link.check("echo $((6 * 7))")).strip() == "42"
            spool = tmp_path / "spool"
            spool.mkdir()
            final = await link.put_atomically(b"RIFF", str(spool), "one.wav")
            assert final == f"{spool}/one.wav"
            assert sorted(p.name for p in spool.iterdir()) == ["one.wav"]
            assert await link.listdir(str(spool)) == ["one.wav"]
            assert await link.listdir(str(spool / "absent")) == []
            assert await link.read_bytes(final) == b"RIFF"


async def _smoke_against(sshd: OpenSsh, pin: HostKeyPin, work: Path) -> dict[str, str]:
    options = SshBoardOptions(key=sshd.client_key, pin=pin, profile=load_profile())
    board = SshBoard(SshAddress("root", "127.0.0.1", sshd.port), work, options)
    async with board:
        ctx = TargetContext(board, HomeWatch("nats://127.0.0.1:1"), work)
        result = await run_suites("ssh", build_suites(["smoke"], ()), ctx, board.logs)
    assert not result.ok
    return {c.name: f"{c.verdict}: {c.reason}" for c in result.cases}


async def test_a_board_presenting_another_host_key_fails_board_reachable_naming_both(
    tmp_path: Path,
) -> None:
    stranger = keygen(tmp_path / "stranger", "not-the-board")
    async with openssh_server(tmp_path / "sshd") as sshd:
        wrong = tmp_path / "known_hosts"
        wrong.write_text(f"[127.0.0.1]:{sshd.port} {stranger}\n")
        verdicts = await _smoke_against(sshd, HostKeyPin(known_hosts=wrong), tmp_path / "w")
        empty = tmp_path / "empty_known_hosts"
        empty.write_text("")
        unpinned = await _smoke_against(sshd, HostKeyPin(known_hosts=empty), tmp_path / "u")
        sshd_log = sshd.log.read_text()
    presented = await asyncio.to_thread(_fingerprint, sshd.known_hosts)
    expected = await asyncio.to_thread(_fingerprint, tmp_path / "stranger.pub")
    reachable = verdicts["board_reachable"]
    assert reachable.startswith("fail: host key of ssh://root@127.0.0.1")
    assert f"expected ssh-ed25519 {expected}" in reachable
    assert f"presented ssh-ed25519 {presented}" in reachable
    assert verdicts["services_up"].startswith("fail: the board ssh://root@127.0.0.1")
    assert "unreachable" in verdicts["services_up"]
    assert unpinned["board_reachable"].startswith("fail: no host key is pinned")
    assert presented in unpinned["board_reachable"]
    assert "Accepted publickey" not in sshd_log  # never logged in to a board it could not trust


def _fingerprint(public: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(public)],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    return out.split()[1]


async def test_hil_run_over_ssh_with_the_wrong_host_key_exits_1_and_reports_why(
    tmp_path: Path,
) -> None:
    stranger = keygen(tmp_path / "stranger", "not-the-board")
    async with openssh_server(tmp_path / "sshd") as sshd:
        wrong = tmp_path / "known_hosts"
        wrong.write_text(f"[127.0.0.1]:{sshd.port} {stranger}\n")
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("hil")), "run",
            "--target", f"ssh://root@127.0.0.1:{sshd.port}", "--key", str(sshd.client_key),
            "--known-hosts", str(wrong), "--suite", "smoke", "--report", str(tmp_path / "out"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 1, err.decode()
    junit = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    failure = junit.find(".//testcase[@name='board_reachable']/failure")
    assert failure is not None
    assert "does not match the pinned key" in (failure.get("message") or "")
    assert "FAIL" in out.decode()


def test_hil_run_refuses_bad_remote_options_with_exit_2(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).with_name("hil"))
    for args, says in [
        (["--target", "ssh://root@127.0.0.1:2222", "--relay", "2222"], "LISTEN_HOST:PORT"),
        (["--target", "qemu:"], "needs an image"),
        (["--target", "ssh://root@h", "--board-profile", str(tmp_path / "none.yaml")], "none"),
    ]:
        run = subprocess.run(
            [exe, "run", *args, "--suite", "smoke", "--report", str(tmp_path / "o")],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert says in run.stderr
