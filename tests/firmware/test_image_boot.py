"""The session's qemu-profile image (``built_qemu_image``): its manifest names what the board
runs, and it rebuilds byte for byte. Its boot, to the edge's own readiness with home down
and then driven like a real board, is tests/hil/test_qemu.py: one boot serves both.

Slow: a cold machine first builds the base system with mmdebstrap under
emulation (~10 min here, then cached under ~/.cache/tether); a warm image build
takes about a minute. CI runs it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from firmware.build import build
from firmware.flash import image_manifest
from firmware.report import SilentReporter
from tests.support.board_image import BuiltQemuImage

# The first test to use the image builds it: on a cold cache that includes the base system.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def test_the_image_manifest_names_what_the_board_runs(built_qemu_image: BuiltQemuImage) -> None:
    image = built_qemu_image
    manifest = image_manifest(image.image)
    assert manifest == image.manifest
    assert manifest.edge.exec_start.startswith("/opt/tether/venv/bin/edge run --config ")
    assert manifest.edge.home == f"10.0.2.2:{image.home_port}"
    assert manifest.debian.packages["libatomic1"] and manifest.debian.packages["systemd"]


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
