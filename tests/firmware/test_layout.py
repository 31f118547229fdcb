"""The disk layout: arithmetic, then a real image read back with sfdisk, mtools and debugfs."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from firmware import layout
from firmware.errors import LayoutError
from firmware.layout import MIB, SECTOR
from tests.firmware.conftest import build_small_disk


def test_plan_places_boot_at_one_mib_and_root_right_after() -> None:
    plan = layout.plan_layout(0x1234ABCD, 100 * MIB, boot_mib=256)
    assert (plan.boot.start, plan.boot.size) == (MIB, 256 * MIB)
    assert plan.root.start == plan.boot.end == 257 * MIB
    assert plan.size == plan.root.end == 357 * MIB
    assert plan.partuuid(2) == "1234abcd-02"
    assert plan.boot.bootable and not plan.root.bootable


def test_sfdisk_script_is_in_sectors() -> None:
    plan = layout.plan_layout(0x1234ABCD, 100 * MIB, boot_mib=64)
    script = plan.sfdisk_script()
    assert "label-id: 0x1234abcd" in script
    assert f"start={MIB // SECTOR}, size={64 * MIB // SECTOR}, type=c, bootable" in script
    assert f"start={65 * MIB // SECTOR}, size={100 * MIB // SECTOR}, type=83" in script


@pytest.mark.parametrize(
    ("disk_id", "root", "boot", "message"),
    [
        (0, MIB, 64, "disk id"),
        (2**32, MIB, 64, "disk id"),
        (1, MIB, 8, "at least"),
        (1, MIB + 1, 64, "multiple of 1 MiB"),
        (1, 0, 64, "positive"),
    ],
)
def test_impossible_layouts_are_refused(disk_id: int, root: int, boot: int, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        layout.plan_layout(disk_id, root, boot_mib=boot)


def test_root_size_leaves_room_and_is_aligned() -> None:
    for content in (0, 1, 300 * MIB, 2000 * MIB + 7):
        size = layout.root_size_for(content)
        assert size % MIB == 0
        assert size >= content + layout.ROOT_SLACK_MIN_MIB * MIB
    with pytest.raises(LayoutError):
        layout.root_size_for(-1)


def test_identities_are_stable_per_device_and_differ_between_devices() -> None:
    assert layout.disk_id_for("tui") == layout.disk_id_for("tui")
    assert layout.disk_id_for("tui") != layout.disk_id_for("board")
    assert layout.fs_uuid_for("tui", "root") != layout.fs_uuid_for("board", "root")
    assert len(layout.fat_volume_id_for("tui")) == 8


def _sfdisk_json(image: Path) -> dict[str, object]:
    out = subprocess.run(
        ["sfdisk", "--json", str(image)], capture_output=True, text=True, check=True
    )
    table: dict[str, object] = json.loads(out.stdout)["partitiontable"]
    return table


def _debugfs(image: Path, request: str) -> str:
    out = subprocess.run(
        ["debugfs", "-R", request, str(image)], capture_output=True, text=True, check=True
    )
    return out.stdout


def test_real_image_partition_table(small_image: tuple[Path, Path, object]) -> None:
    image, _, _ = small_image
    table = _sfdisk_json(image)
    assert table["label"] == "dos"
    assert table["id"] == "0x0badcafe"
    parts = table["partitions"]
    assert isinstance(parts, list)
    boot, root = parts
    assert (boot["start"], boot["size"], boot["type"], boot.get("bootable")) == (
        MIB // SECTOR,
        64 * MIB // SECTOR,
        "c",
        True,
    )
    assert (root["start"], root["size"], root["type"]) == (
        65 * MIB // SECTOR,
        16 * MIB // SECTOR,
        "83",
    )
    assert image.stat().st_size == 81 * MIB


def test_real_image_fat_contents(small_image: tuple[Path, Path, object]) -> None:
    image, _, _ = small_image
    fat = f"{image}@@{MIB}"
    env = {"MTOOLS_SKIP_CHECK": "1", "PATH": "/usr/bin:/bin"}
    listing = subprocess.run(
        ["mdir", "-i", fat, "-b", "-/", "::/"], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert "::/cmdline.txt" in listing
    assert "::/overlays/README" in listing
    text = subprocess.run(
        ["mtype", "-i", fat, "::/cmdline.txt"], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert "root=PARTUUID=0badcafe-02" in text
    info = subprocess.run(
        ["minfo", "-i", fat], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert "TETHERBOOT" in info
    assert "fat32" in info.lower() or "FAT32" in info


def test_real_image_ext4_contents(tmp_path: Path, small_image: tuple[Path, Path, object]) -> None:
    image, _, _ = small_image
    root = tmp_path / "root.img"
    # debugfs reads a filesystem image, so cut the root partition out of the disk.
    subprocess.run(
        ["dd", f"if={image}", f"of={root}", "bs=1M", "skip=65", "count=16", "status=none"],
        check=True,
    )
    assert _debugfs(root, "cat /etc/tether/edge.yaml") == "device: tui\n"
    key = _debugfs(root, "stat /etc/tether/keys/tui.edge.key")
    assert "Mode:  0600" in key or "Mode:  0600" in " ".join(key.split("  "))
    assert "User:  1000" in key and "Group:  1000" in key
    assert 'Fast link dest: "usr/bin"' in _debugfs(root, "stat /bin")
    header = subprocess.run(
        ["dumpe2fs", "-h", str(root)], capture_output=True, text=True, check=True
    ).stdout
    assert "tether-root" in header
    assert layout.fs_uuid_for("tui", "root") in header


def test_same_inputs_give_the_same_image_bytes(tmp_path: Path, image_tools: None) -> None:
    """The reproducibility machinery (pinned times, ids, hash seed) on a small real image."""
    first, _ = build_small_disk(tmp_path / "one")
    second, _ = build_small_disk(tmp_path / "two")
    assert (
        hashlib.sha256(first.read_bytes()).hexdigest()
        == hashlib.sha256(second.read_bytes()).hexdigest()
    )
