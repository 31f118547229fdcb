"""`hil`'s qemu target: the session's firmware image booted under qemu-system-aarch64, driven
over SSH exactly like a real board (same SshBoard, systemd profile, pinned host key).

What the image can show today: it boots, sshd presents the host key hil put on
the scratch disk (pinned; nothing is trusted on first use), the root login key
works, `systemctl is-active tether-edge` is active, `journalctl -u tether-edge`
is fetched, versions and the bridge half match, the clock is sane and there is
headroom. The image still runs the preflight stand-in instead of `edge run`
(branch firmware-edge switches it), so the bridge link, turns and linkdrop are
not run here; with `edge run` and home reached at 10.0.2.2 they are the same
suites as for ssh.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.runner import Suite, run_suites
from hil.suites import build_suites
from hil.targets.base import HomeWatch, TargetContext
from hil.targets.profile import load_profile
from hil.targets.qemu import QemuBoard
from hil.targets.ssh import SshBoardOptions
from hil.targets.sshlink import HostKeyPin
from tests.support.board_image import BuiltQemuImage

# The cases that need home (bridge_connected) wait for the image that runs `edge run`.
NEEDS_HOME = {"bridge_connected"}


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_a_booted_image_is_driven_like_a_real_board(
    tmp_path: Path, built_qemu_image: BuiltQemuImage
) -> None:
    options = SshBoardOptions(
        key=None,
        pin=HostKeyPin(),
        profile=load_profile(),
        home_half=built_qemu_image.request.bridge_half,  # home's copy: what the image carries
    )
    (smoke,) = build_suites(["smoke"], ())
    suite = Suite("smoke", tuple(c for c in smoke.cases if c.name not in NEEDS_HOME))
    async with QemuBoard(built_qemu_image.image, tmp_path / "run", options) as board:
        ctx = TargetContext(board, HomeWatch("nats://127.0.0.1:1"), tmp_path / "run")
        result = await run_suites("qemu", [suite], ctx, board.logs)
        logs = await board.logs()
        sample = await board.sample()
        who = await board.link.check("id -un; hostname")
    verdicts = {c.name: (c.verdict, c.reason) for c in result.cases}
    assert result.ok, verdicts
    assert [c.name for c in result.cases] == [
        "board_reachable", "services_up", "versions_and_half_match", "clock_sane", "headroom",
    ]  # fmt: skip
    assert board.device == "tui"
    assert who.split() == ["root", "tether-tui"]
    assert "journalctl -u tether-edge" in logs and "tether-edge" in logs
    assert sample.rss_mb > 0
