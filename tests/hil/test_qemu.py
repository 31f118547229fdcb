"""The whole path, for real: the session's firmware image booted under qemu-system-aarch64
reaches the edge's own readiness while its home is down, then is driven over SSH exactly
like a real board (same SshBoard, systemd profile, pinned host key).

One boot of the session's image (``built_qemu_image``: `edge run` with spool
audio, paired with a home) serves both halves, because a boot under TCG is the
slowest step of the suite. sshd presents the host key hil put on the scratch disk
(pinned; nothing is trusted on first use). First nothing listens where the board
dials home: the edge must be ready on its own and say home is unreachable. Then
a real `home up` (scripted model) comes up behind a cuttable relay on the port
the board dials at 10.0.2.2, and the board is driven end to end: the whole smoke
suite, a spooled turn, and linkdrop.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from pathlib import Path

import pytest

from firmware.staging import SPOOL_IN, SPOOL_OUT
from hil.runner import run_suites
from hil.suites import build_suites
from hil.targets.base import TargetContext
from hil.targets.home_side import HomeSide
from hil.targets.profile import load_profile
from hil.targets.proxy import CuttableRelay
from hil.targets.qemu import QemuBoard
from hil.targets.ssh import SshBoard, SshBoardOptions
from hil.targets.sshlink import HostKeyPin
from hil.targets.virtual import DEFAULT_PHRASES
from shared.proc import free_port
from tests.support.board_image import BuiltQemuImage
from tests.support.home_up import running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Understood."})


HOME_WAIT_S = 120.0
BOOT_LIMIT_S = 1500.0  # under TCG on a busy 2-core machine; ~160 s on a quiet one


async def unit_properties(board: SshBoard) -> dict[str, str]:
    names = "ExecStart,StatusText,ActiveState,SubState,NRestarts,User"
    text = await board.link.check(f"systemctl show tether-edge.service -p {names}")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


async def stop_edge(board: SshBoard) -> dict[str, str]:
    """Stop the edge's unit as systemd does on a shutdown; its state and exit status after."""
    await board.link.check("systemctl stop tether-edge.service", timeout_s=300)
    text = await board.link.check(
        "systemctl show tether-edge.service -p ActiveState,Result,ExecMainStatus"
    )
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


async def look_with_home_down(board: SshBoard) -> tuple[dict[str, str], str, str]:
    """Wait until the edge says home is unreachable; read its unit, journal and spools."""
    async with asyncio.timeout(HOME_WAIT_S):
        props = await unit_properties(board)
        while "home unreachable" not in props["StatusText"]:
            await asyncio.sleep(2)
            props = await unit_properties(board)
    journal = await board.link.check("journalctl -u tether-edge.service -o cat --no-pager")
    # The edge's user writes the input spool as a harness does (tmp, then rename).
    probe = shlex.quote(f"{SPOOL_IN}/probe")
    write = f"echo x > {probe}.tmp && mv {probe}.tmp {probe}.txt && rm {probe}.txt"
    spool = await board.link.check(
        f"runuser -u tether -- sh -c {shlex.quote(write)} && "
        f"stat -c '%U %a %n' {SPOOL_IN} {SPOOL_OUT} && cat /etc/tether/edge.yaml"
    )
    return props, journal, spool


def assert_ready_on_its_own(
    board: QemuBoard, image: BuiltQemuImage, seen: tuple[dict[str, str], str, str]
) -> None:
    props, journal, spool = seen
    # Ready came from edge run itself: it is the unit's main process (NotifyAccess=main),
    # it sent READY=1, and it is still the same process (never restarted).
    assert props["ExecStart"].split("argv[]=")[1].startswith("/opt/tether/venv/bin/edge run ")
    assert (props["ActiveState"], props["SubState"], props["NRestarts"]) == (
        "active",
        "running",
        "0",
    )
    assert props["User"] == "tether"
    assert f"home unreachable (bridge {image.device}: " in props["StatusText"]
    log = board.console_log.read_text()
    assert "tether-edge: ready (READY=1 received on NOTIFY_SOCKET)" in log
    assert "tether-firstboot: done" in log
    flat = " ".join(journal.split())
    assert f"edge {image.device} listening on nats://" in flat
    assert "loaded models (" in flat and "started systemd" in flat
    assert "home is unreachable" in flat
    assert f"tether 755 {SPOOL_IN}" in spool and f"tether 755 {SPOOL_OUT}" in spool
    assert f"input: {{kind: spool, dir: {SPOOL_IN}}}" in spool


@pytest.mark.slow
@pytest.mark.timeout(
    2400
)  # the first user of the image builds it, on a cold cache with the base system
async def test_a_booted_image_is_ready_with_home_down_then_driven_like_a_real_board(
    tmp_path: Path, built_qemu_image: BuiltQemuImage
) -> None:
    home_data = tmp_path / "home"
    await asyncio.to_thread(shutil.copytree, built_qemu_image.home_data, home_data)
    home_port = free_port()
    # The board dials 10.0.2.2:image.home_port, which is this machine's 127.0.0.1:image.home_port:
    # the relay listens there only once home is up.
    relay = CuttableRelay(built_qemu_image.home_port, home_port)
    options = SshBoardOptions(
        key=None,
        pin=HostKeyPin(),
        profile=load_profile(),
        home=HomeSide(home_data),
        relay=relay,
        phrases=DEFAULT_PHRASES[:1],
    )
    qemu = QemuBoard(built_qemu_image.image, tmp_path / "run", options, limit_s=BOOT_LIMIT_S)
    async with qemu as board:
        assert await board.reachable() is None
        seen = await look_with_home_down(board)
        assert_ready_on_its_own(qemu, built_qemu_image, seen)
        async with (
            ScriptedModel(responder=_speak) as model,
            running_home(home_data, model.url, bridge_port=home_port),
            relay,
            board.watch() as home,
        ):
            ctx = TargetContext(board, home, tmp_path / "run", turn_timeout_s=120)
            suites = build_suites(["smoke", "turn", "linkdrop"], DEFAULT_PHRASES[:1])
            result = await run_suites("qemu", suites, ctx, board.logs)
            played = await board.playbacks()
        stopped = await stop_edge(board)
    verdicts = {f"{c.suite}/{c.name}": (c.verdict, c.reason) for c in result.cases}
    assert result.ok, verdicts
    stages = {m.stage for c in result.cases if c.suite == "turn" for m in c.measurements}
    # The wait by stage (hil/wait.py): the board's own stages and home's; the bridge
    # stages span the guest's clock and home's, which are never subtracted.
    assert {"endpointing", "asr_final", "routing", "model", "tts_first_chunk"} <= stages
    assert not {"bridge_up", "bridge_down"} & stages
    assert played is not None and played >= 2  # the answer and the notice while cut off
    # A stop (an update, a shutdown) is clean: the edge, signalled alone, closes its bus
    # client before it stops its own nats-server, and exits 0.
    assert stopped == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
