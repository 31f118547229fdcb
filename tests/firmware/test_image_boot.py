"""The whole path, for real: a qemu-profile image (the session's ``built_qemu_image``) boots
to the edge's own readiness while its home is down, and rebuilds byte for byte.

Slow: a cold machine first builds the base system with mmdebstrap under
emulation (~10 min here, then cached under ~/.cache/tether); a warm image build
takes about a minute; under TCG the board boots in ~40 s and the edge then
spends minutes loading the Vosk model and rendering its notice. CI runs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from pathlib import Path

import asyncssh
import pytest

from firmware.boottest import BootedBoard, booted
from firmware.build import build
from firmware.flash import image_manifest
from firmware.report import SilentReporter
from firmware.staging import SPOOL_IN, SPOOL_OUT
from tests.support.board_image import BuiltQemuImage

# The first test to use the image builds it: on a cold cache that includes the base system.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
BOOT_LIMIT_S = 1500.0
HOME_WAIT_S = 120.0


async def board_shell(board: BootedBoard, image: BuiltQemuImage, command: str) -> str:
    """Run ``command`` on the board as its login user, over the forwarded SSH port."""
    async with asyncssh.connect(
        "127.0.0.1",
        board.ssh_port,
        username=image.ssh_user,
        client_keys=[str(image.ssh_key)],
        known_hosts=None,  # the board made its host key at first boot, seconds ago
        connect_timeout=30,
    ) as conn:
        done = await asyncio.wait_for(conn.run(command, check=True), 60)
    return str(done.stdout)


async def unit_properties(board: BootedBoard, image: BuiltQemuImage) -> dict[str, str]:
    names = "ExecStart,StatusText,ActiveState,SubState,NRestarts,User"
    text = await board_shell(board, image, f"systemctl show tether-edge.service -p {names}")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


async def boot_and_look(image: BuiltQemuImage, console: Path) -> tuple[dict[str, str], str, str]:
    """Boot to readiness; wait until the edge says home is unreachable; read unit and journal."""
    async with booted(image.image, image.manifest, limit_s=BOOT_LIMIT_S, console_log=console) as b:
        async with asyncio.timeout(HOME_WAIT_S):
            props = await unit_properties(b, image)
            while "home unreachable" not in props["StatusText"]:
                await asyncio.sleep(2)
                props = await unit_properties(b, image)
        journal = await board_shell(b, image, "journalctl -u tether-edge.service -o cat --no-pager")
        # The login user writes the input spool as a harness does (tmp, then rename).
        probe = shlex.quote(f"{SPOOL_IN}/probe")
        spool = await board_shell(
            b,
            image,
            f"echo x > {probe}.tmp && mv {probe}.tmp {probe}.txt && rm {probe}.txt && "
            f"stat -c '%U %a %n' {SPOOL_IN} {SPOOL_OUT} && cat /etc/tether/edge.yaml",
        )
    return props, journal, spool


def test_the_board_boots_to_the_edges_own_readiness_with_home_down(
    built_qemu_image: BuiltQemuImage, tmp_path: Path
) -> None:
    image = built_qemu_image
    manifest = image_manifest(image.image)
    assert manifest == image.manifest
    assert manifest.edge.exec_start.startswith("/opt/tether/venv/bin/edge run --config ")
    assert manifest.edge.home == f"10.0.2.2:{image.home_port}"
    assert manifest.debian.packages["libatomic1"] and manifest.debian.packages["systemd"]

    console = tmp_path / "console.log"
    props, journal, spool = asyncio.run(boot_and_look(image, console))

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
    log = console.read_text()
    assert "tether-edge: ready (READY=1 received on NOTIFY_SOCKET)" in log
    assert "tether-firstboot: done" in log
    flat = " ".join(journal.split())
    assert f"edge {image.device} listening on nats://" in flat
    assert "loaded models (" in flat and "started systemd" in flat
    assert "home is unreachable" in flat
    assert f"tether 755 {SPOOL_IN}" in spool and f"tether 755 {SPOOL_OUT}" in spool
    assert f"input: {{kind: spool, dir: {SPOOL_IN}}}" in spool


def test_a_rebuild_with_the_same_inputs_is_identical(
    built_qemu_image: BuiltQemuImage, tmp_path: Path
) -> None:
    first = built_qemu_image.result
    request = dataclasses.replace(built_qemu_image.request, out=tmp_path / "again")
    reporter = SilentReporter()
    again = build(request, reporter)
    assert [t.stage for t in reporter.times] == [
        "host",
        "rootfs",
        "wheelhouse",
        "stage",
        "boot-fs",
        "root-fs",
        "assemble",
        "compress",
        "cleanup",
        "manifest",
    ]
    assert again.rootfs_cached
    assert again.manifest.image.sha256 == first.manifest.image.sha256
    assert again.manifest.compressed.sha256 == first.manifest.compressed.sha256
    assert again.manifest_path.read_bytes() == first.manifest_path.read_bytes()
