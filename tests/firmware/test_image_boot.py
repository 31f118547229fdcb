"""The whole path, for real: build a qemu-profile image (base system from the cache) and boot it.

Slow: a cold machine first builds the base system with mmdebstrap under
emulation (~5-9 min here, then cached under ~/.cache/tether); each image takes
a minute or two, the boot under TCG ~1 min. A second build with the same
SOURCE_DATE_EPOCH must give the same bytes. CI runs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from firmware.boottest import boot_test
from firmware.build import build
from firmware.flash import image_manifest
from firmware.report import SilentReporter
from firmware.service import load_service_config
from tests.support.board_image import BuiltQemuImage


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_build_boot_to_readiness_and_rebuild_identically(
    tmp_path: Path, built_qemu_image: BuiltQemuImage
) -> None:
    built = built_qemu_image
    request, result, reporter = built.request, built.result, built.reporter
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
    manifest = image_manifest(result.image)
    assert manifest == result.manifest
    assert manifest.debian.packages["systemd"] and manifest.debian.packages["linux-image-arm64"]
    assert (
        manifest.edge.bridge_half_digest
        and manifest.edge.exec_start in load_service_config(None).exec_start
    )
    console = tmp_path / "console.log"
    report = asyncio.run(boot_test(result.image, manifest, limit_s=900, console_log=console))
    assert report.ready_s is not None and report.ssh_s is not None
    assert report.ssh_banner.startswith("SSH-2.0-OpenSSH")
    log = console.read_text()
    assert "tether-firstboot: done" in log
    assert "tether-edge: ready (READY=1 received on NOTIFY_SOCKET)" in log
    if "board_preflight" in manifest.edge.exec_start:
        assert "tether preflight: device tui: config ok, bridge half" in log

    again = build(dataclasses.replace(request, out=tmp_path / "again"), SilentReporter())
    assert again.manifest.image.sha256 == manifest.image.sha256
    assert again.manifest.compressed.sha256 == manifest.compressed.sha256
    assert again.manifest_path.read_bytes() == result.manifest_path.read_bytes()
