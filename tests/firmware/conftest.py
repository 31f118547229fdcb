"""Fixtures for the firmware tests: small real filesystems and images made with the real tools."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from firmware import disk, layout
from firmware.layout import MIB, DiskLayout
from firmware.manifest import (
    DebianRecord,
    EdgeRecord,
    FileDigest,
    Manifest,
    PartitionRecord,
)
from firmware.stream import compress_file

TOOLS = ("mkfs.vfat", "mcopy", "mdir", "mtype", "mkfs.ext4", "debugfs", "sfdisk", "dd")


@pytest.fixture(scope="session")
def image_tools() -> None:
    """The Debian tools the layout tests drive (installed by `make test` via DEB_PACKAGES)."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"missing {missing}: run `make bootstrap` (DEB_PACKAGES in the Makefile)")


def make_tree(root: Path) -> None:
    """A tiny root tree: a config, a private key, a symlink, a nested folder."""
    (root / "etc/tether/keys").mkdir(parents=True)
    (root / "etc/tether/edge.yaml").write_text("device: tui\n")
    key = root / "etc/tether/keys/tui.edge.key"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n")
    os.chmod(key, 0o600)
    os.chown(key, 1000, 1000)
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/hello").write_bytes(b"#!/bin/sh\necho hello\n" * 500)
    os.chmod(root / "usr/bin/hello", 0o755)
    (root / "bin").symlink_to("usr/bin")


def make_boot(root: Path) -> None:
    """A tiny boot partition tree."""
    root.mkdir(parents=True)
    (root / "cmdline.txt").write_text("console=ttyAMA0 root=PARTUUID=0badcafe-02\n")
    (root / "overlays").mkdir()
    (root / "overlays/README").write_text("overlays go here\n")


def build_small_disk(work: Path, epoch: int | None = 1_700_000_000) -> tuple[Path, DiskLayout]:
    """A real (small) disk image: MBR, FAT32 64 MiB, ext4 16 MiB, made as the build makes it."""
    work.mkdir(parents=True, exist_ok=True)
    tree, boot = work / "tree", work / "boot"
    tree.mkdir()
    make_tree(tree)
    make_boot(boot)
    if epoch is not None:
        for base in (tree, boot):
            for path in [base, *base.rglob("*")]:
                os.utime(path, (epoch, epoch), follow_symlinks=False)
    plan = layout.plan_layout(0x0BADCAFE, 16 * MIB, boot_mib=64)
    disk.make_fat(
        work / "boot.img", plan.boot, boot, volume_id="12345678", label="TETHERBOOT", epoch=epoch
    )
    disk.make_ext4(
        work / "root.img",
        plan.root,
        tree,
        fs_uuid=layout.fs_uuid_for("tui", "root"),
        label="tether-root",
        inodes=256,
        epoch=epoch,
    )
    image = work / "disk.img"
    disk.assemble(image, plan, work / "boot.img", work / "root.img")
    return image, plan


def manifest_for(image: Path, compressed: Path, plan: DiskLayout) -> Manifest:
    """Compress ``image`` to ``compressed`` and describe it as a build would."""
    digests = compress_file(image, compressed)
    return Manifest(
        device="tui",
        profile="qemu",
        image=FileDigest(image.name, digests.raw_size, digests.raw_sha256),
        compressed=FileDigest(compressed.name, digests.compressed_size, digests.compressed_sha256),
        disk_id=f"{plan.disk_id:08x}",
        partitions=[
            PartitionRecord(
                1, plan.boot.start, plan.boot.size, "c", "vfat", "TETHERBOOT", plan.partuuid(1)
            ),
            PartitionRecord(
                2, plan.root.start, plan.root.size, "83", "ext4", "tether-root", plan.partuuid(2)
            ),
        ],
        debian=DebianRecord("bookworm", "arm64", ["main"], "0" * 16, {"systemd": "252"}),
        edge=EdgeRecord("0.1.0", "0" * 64, "/bin/true", "device: tui\n", None, None, None, False),
        source_date_epoch=1_700_000_000,
    )


@pytest.fixture(scope="session")
def small_image(
    tmp_path_factory: pytest.TempPathFactory, image_tools: None
) -> tuple[Path, Path, Manifest]:
    """A small real image, its .img.zst and a manifest beside it (shared, read-only)."""
    work = tmp_path_factory.mktemp("small-image")
    image, plan = build_small_disk(work / "build")
    compressed = work / "tui-0.1.0.img.zst"
    manifest = manifest_for(image, compressed, plan)
    manifest.write(work / "tui-0.1.0.manifest.json")
    return image, compressed, manifest
