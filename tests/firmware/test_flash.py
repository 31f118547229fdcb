"""`firmware flash` and `firmware verify`: every refusal, streaming write, read-back verify.

The block devices here are loop-free fakes: a ``mknod`` node plus a small sysfs
tree and mounts file that :class:`~firmware.target.SystemPaths` points at.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from firmware.cli import app
from firmware.errors import FlashRefused, ManifestError, VerifyError
from firmware.flash import FlashOptions, flash, image_manifest, verify
from firmware.manifest import FileDigest, Manifest
from firmware.target import SystemPaths, probe, refusals

GIB = 1024**3
FAKE_MAJOR = 7  # the loop driver's major; these minors are never opened


@dataclass
class FakeDisk:
    """A fake SD card: its node, one partition node, and the system paths that describe them."""

    node: Path
    partition: Path
    system: SystemPaths
    mounts: Path
    size_file: Path


@pytest.fixture
def fake_disk(tmp_path: Path) -> FakeDisk:
    if os.geteuid() != 0:
        pytest.fail("the fake block device needs mknod (root); CI and `make test` run as root")
    dev, sysfs = tmp_path / "dev", tmp_path / "sys"
    dev.mkdir()
    node, part = dev / "sdz", dev / "sdz1"
    os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(FAKE_MAJOR, 240))
    os.mknod(part, stat.S_IFBLK | 0o600, os.makedev(FAKE_MAJOR, 241))
    disk_dir = sysfs / "devices/virtual/block/sdz"
    (disk_dir / "sdz1").mkdir(parents=True)
    (disk_dir / "dev").write_text(f"{FAKE_MAJOR}:240\n")
    (disk_dir / "size").write_text(str(8 * GIB // 512))
    (disk_dir / "sdz1/dev").write_text(f"{FAKE_MAJOR}:241\n")
    (disk_dir / "sdz1/partition").write_text("1\n")
    (disk_dir / "sdz1/size").write_text(str(GIB // 512))
    links = sysfs / "dev/block"
    links.mkdir(parents=True)
    (links / f"{FAKE_MAJOR}:240").symlink_to(disk_dir)
    (links / f"{FAKE_MAJOR}:241").symlink_to(disk_dir / "sdz1")
    mounts = tmp_path / "mounts"
    mounts.write_text("proc /proc proc rw 0 0\n")
    return FakeDisk(node, part, SystemPaths(sysfs=sysfs, mounts=mounts), mounts, disk_dir / "size")


def _refusals(disk: FakeDisk, *, image_size: int = 100, allow_large: bool = False) -> list[str]:
    facts = probe(disk.node, disk.system)
    return refusals(facts, image_size, to_file=False, max_bytes=16 * GIB, allow_large=allow_large)


def test_fake_card_passes_every_rule(fake_disk: FakeDisk) -> None:
    facts = probe(fake_disk.node, fake_disk.system)
    assert facts.is_block and facts.size == 8 * GIB and not facts.mounted_at
    assert not facts.holds_root
    assert _refusals(fake_disk) == []


def test_refuses_a_mounted_device(fake_disk: FakeDisk) -> None:
    fake_disk.mounts.write_text(f"{fake_disk.partition} /media/card vfat rw 0 0\n")
    (reason,) = _refusals(fake_disk)
    assert "is mounted (at /media/card)" in reason


def test_refuses_the_disk_holding_root(fake_disk: FakeDisk, tmp_path: Path) -> None:
    root_dev = os.stat("/").st_dev
    node = tmp_path / "dev" / "rootdisk"
    os.mknod(node, stat.S_IFBLK | 0o600, root_dev)
    facts = probe(node, SystemPaths(sysfs=tmp_path / "sys", mounts=fake_disk.mounts))
    assert facts.holds_root
    reasons = refusals(facts, 100, to_file=False, max_bytes=16 * GIB, allow_large=True)
    assert any("holding this system's root filesystem '/'" in r for r in reasons)


def test_refuses_a_large_device_unless_overridden(fake_disk: FakeDisk) -> None:
    fake_disk.size_file.write_text(str(64 * GIB // 512))
    (reason,) = _refusals(fake_disk)
    assert "64.0 GiB, over the 16 GiB limit" in reason and "--allow-large" in reason
    assert _refusals(fake_disk, allow_large=True) == []


def test_refuses_a_device_smaller_than_the_image(fake_disk: FakeDisk) -> None:
    (reason,) = _refusals(fake_disk, image_size=9 * GIB)
    assert "smaller than the image" in reason


def test_refuses_a_device_of_unknown_size(fake_disk: FakeDisk) -> None:
    fake_disk.size_file.unlink()
    (reason,) = _refusals(fake_disk)
    assert "cannot tell the size" in reason


def test_flash_refuses_before_writing(
    fake_disk: FakeDisk, small_image: tuple[Path, Path, Manifest]
) -> None:
    _, compressed, manifest = small_image
    fake_disk.mounts.write_text(f"{fake_disk.node} /mnt ext4 rw 0 0\n")
    with pytest.raises(FlashRefused, match="is mounted"):
        flash(compressed, fake_disk.node, manifest, FlashOptions(system=fake_disk.system))


def test_refuses_files_without_to_file(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    _, compressed, manifest = small_image
    existing = tmp_path / "card.img"
    existing.write_bytes(b"precious")
    with pytest.raises(FlashRefused, match="is not a block device; pass --to-file"):
        flash(compressed, existing, manifest, FlashOptions())
    assert existing.read_bytes() == b"precious"
    with pytest.raises(FlashRefused, match="does not exist; pass --to-file"):
        flash(compressed, tmp_path / "absent", manifest, FlashOptions())
    with pytest.raises(FlashRefused, match="neither a block device nor a regular file"):
        flash(compressed, Path("/dev/null"), manifest, FlashOptions(to_file=True))


def test_flash_to_file_streams_and_reads_back(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    raw, compressed, manifest = small_image
    target = tmp_path / "card.img"
    seen: list[int] = []
    phases: list[int] = []
    result = flash(
        compressed,
        target,
        manifest,
        FlashOptions(to_file=True),
        on_progress=seen.append,
        on_phase=phases.append,
    )
    assert result.sha256 == manifest.image.sha256 and result.written == manifest.image.size
    assert target.read_bytes() == raw.read_bytes()
    assert phases == [1, 2]
    assert sum(seen) == 2 * manifest.image.size  # written, then read back
    assert verify(target, manifest).sha256 == manifest.image.sha256
    assert verify(compressed, manifest).kind == "compressed image"


def test_refuses_an_image_that_does_not_match_its_manifest(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    _, compressed, manifest = small_image
    tampered = tmp_path / compressed.name
    data = bytearray(compressed.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    target = tmp_path / "card.img"
    with pytest.raises(ManifestError, match="the manifest says"):
        flash(tampered, target, manifest, FlashOptions(to_file=True))
    assert not target.exists()


def test_refuses_a_manifest_of_another_image(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    _, compressed, manifest = small_image
    other = tmp_path / "board-0.1.0.img.zst"
    shutil.copy(compressed, other)
    with pytest.raises(ManifestError, match="no manifest"):
        image_manifest(other)
    manifest.write(tmp_path / "board-0.1.0.manifest.json")
    with pytest.raises(
        ManifestError, match=re.escape("describes tui-0.1.0.img.zst, not board-0.1.0.img.zst")
    ):
        image_manifest(other)


def test_decompressed_bytes_are_checked_while_streaming(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    _, compressed, manifest = small_image
    wrong = dataclasses.replace(
        manifest, image=FileDigest(manifest.image.name, manifest.image.size, "0" * 64)
    )
    with pytest.raises(VerifyError, match="the manifest says"):
        flash(compressed, tmp_path / "card.img", wrong, FlashOptions(to_file=True))


def test_verify_finds_a_changed_byte(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    raw, _, manifest = small_image
    card = tmp_path / "card.img"
    data = bytearray(raw.read_bytes())
    data[-1] ^= 0x01
    card.write_bytes(bytes(data))
    with pytest.raises(VerifyError, match="expected"):
        verify(card, manifest)
    card.write_bytes(bytes(data[:1000]))
    with pytest.raises(VerifyError, match="holds only 1000 bytes"):
        verify(card, manifest)


def test_cli_exit_codes(tmp_path: Path, small_image: tuple[Path, Path, Manifest]) -> None:
    raw, compressed, _ = small_image
    runner = CliRunner()
    target = tmp_path / "card.img"
    refused = runner.invoke(app, ["flash", str(compressed), "--device", str(target)])
    assert refused.exit_code == 2
    assert "refusing to flash" in refused.output and "--to-file" in refused.output
    done = runner.invoke(
        app, ["flash", str(compressed), "--device", str(target), "--to-file", "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout.strip().splitlines()[-1])["verified"] is True
    manifest_path = compressed.with_name("tui-0.1.0.manifest.json")
    ok = runner.invoke(app, ["verify", str(target), "--manifest", str(manifest_path), "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"] is True
    with target.open("r+b") as handle:
        handle.seek(raw.stat().st_size // 2)
        handle.write(b"\xde\xad")
    bad = runner.invoke(app, ["verify", str(target), "--manifest", str(manifest_path)])
    assert bad.exit_code == 1 and "expected" in bad.output
