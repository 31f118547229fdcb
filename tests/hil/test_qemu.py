"""`hil`'s qemu target: the session's firmware image booted under qemu-system-aarch64, driven
over SSH exactly like a real board (same SshBoard, systemd profile, pinned host key).

One boot of the session's image (``built_qemu_image``: `edge run` with spool
audio, paired with a home). sshd presents the host key hil put on the scratch
disk (pinned; nothing is trusted on first use), and the board is driven end to
end: a real `home up` (scripted model) behind a cuttable relay on the port the
board dials at 10.0.2.2, the whole smoke suite, a spooled turn, and linkdrop.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from hil.runner import run_suites
from hil.suites import build_suites
from hil.targets.base import TargetContext
from hil.targets.home_side import HomeSide
from hil.targets.profile import load_profile
from hil.targets.proxy import CuttableRelay
from hil.targets.qemu import QemuBoard
from hil.targets.ssh import SshBoardOptions
from hil.targets.sshlink import HostKeyPin
from hil.targets.virtual import DEFAULT_PHRASES
from shared.proc import free_port
from tests.support.board_image import BuiltQemuImage
from tests.support.home_up import running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Understood."})


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_a_booted_image_is_driven_like_a_real_board(
    tmp_path: Path, built_qemu_image: BuiltQemuImage
) -> None:
    home_data = tmp_path / "home"
    await asyncio.to_thread(shutil.copytree, built_qemu_image.home_data, home_data)
    home_port = free_port()
    async with (
        ScriptedModel(responder=_speak) as model,
        # The board dials 10.0.2.2:home_port, which is this machine's 127.0.0.1:home_port.
        CuttableRelay(built_qemu_image.home_port, home_port) as relay,
        running_home(home_data, model.url, bridge_port=home_port),
    ):
        options = SshBoardOptions(
            key=None,
            pin=HostKeyPin(),
            profile=load_profile(),
            home=HomeSide(home_data),
            relay=relay,
            phrases=DEFAULT_PHRASES[:1],
        )
        async with QemuBoard(built_qemu_image.image, tmp_path / "run", options) as board:
            async with board.watch() as home:
                ctx = TargetContext(board, home, tmp_path / "run", turn_timeout_s=120)
                suites = build_suites(["smoke", "turn", "linkdrop"], DEFAULT_PHRASES[:1])
                result = await run_suites("qemu", suites, ctx, board.logs)
            played = await board.playbacks()
    verdicts = {f"{c.suite}/{c.name}": (c.verdict, c.reason) for c in result.cases}
    assert result.ok, verdicts
    stages = {m.stage for c in result.cases if c.suite == "turn" for m in c.measurements}
    # The wait by stage (hil/wait.py): the board's own stages and home's; the bridge
    # stages span the guest's clock and home's, which are never subtracted.
    assert {"endpointing", "asr_final", "routing", "model", "tts_first_chunk"} <= stages
    assert not {"bridge_up", "bridge_down"} & stages
    assert played is not None and played >= 2  # the answer and the notice while cut off
