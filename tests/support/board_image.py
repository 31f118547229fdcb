"""One qemu-profile board image per test session, paired with a home that is not running.

``build_qemu_image`` is what the ``built_qemu_image`` fixture (tests/conftest.py)
yields: firmware's image tests and HIL's one qemu boot (tests/hil/test_qemu.py) share the one
image instead of building their own (a warm build is about a minute here; the
base system comes from the ``~/.cache/tether`` cache, built once cold).

The board is paired the way ``bridge pair`` pairs any board, into a folder laid
out as a home data directory: ``home up --data-dir HOME_DATA`` serves the board
at ``127.0.0.1:HOME_PORT``, which the board reaches as ``10.0.2.2:HOME_PORT``
(the qemu profile rewrites the loopback host). Until such a home runs, the
board's home is unreachable, which is what a board that boots first sees.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from bridge.pair import pair
from firmware.build import BuildRequest, BuildResult, build
from firmware.host import cache_dir
from firmware.manifest import Manifest
from firmware.profiles import get_profile
from firmware.report import SilentReporter
from firmware.service import load_service_config
from shared.proc import free_port

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000
QEMU_DEVICE = "tui"
BOARD_USER = "tether"  # the edge's service user; SSH login with ``ssh_key``


@dataclass(frozen=True)
class BuiltQemuImage:
    """A built ``qemu`` image and everything needed to boot it, log in, and serve its home."""

    image: Path  # DEVICE-VERSION.img.zst, its manifest beside it
    manifest: Manifest
    device: str
    home_data: Path  # bridge/DEVICE.home.yaml + bridge/secrets/home_host_key: a home data dir
    home_port: int  # home's bridge endpoint port; the board dials 10.0.2.2:home_port
    ssh_key: Path  # private key accepted for BOARD_USER (``ssh_key.pub`` is on the board)
    ssh_user: str
    request: BuildRequest  # the build's inputs, to rebuild identically
    result: BuildResult


def build_qemu_image(work: Path, device: str = QEMU_DEVICE) -> BuiltQemuImage:
    """Pair ``device`` into ``work/home``, make an SSH login key, build the image into ``work``."""
    home_port = free_port()
    home_data = work / "home"
    paired = pair(device, f"127.0.0.1:{home_port}", home_data / "bridge")
    ssh_key = work / "login" / "id_ed25519"
    ssh_key.parent.mkdir(parents=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tether-tests", "-f", str(ssh_key)],
        check=True,
        timeout=30,
    )
    request = BuildRequest(
        device=device,
        profile=get_profile("qemu"),
        out=work / "out",
        source_tree=REPO,
        cache=cache_dir(),
        exec_start=load_service_config(None).exec_start,
        bridge_half=paired.edge_half,
        board_key=paired.client_key,
        ssh_key=ssh_key.with_name(ssh_key.name + ".pub"),
        epoch=EPOCH,
    )
    result = build(request, SilentReporter())
    return BuiltQemuImage(
        image=result.image,
        manifest=result.manifest,
        device=device,
        home_data=home_data,
        home_port=home_port,
        ssh_key=ssh_key,
        ssh_user=BOARD_USER,
        request=request,
        result=result,
    )
