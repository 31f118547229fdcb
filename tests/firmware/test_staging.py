"""The board files written into a tree: config, half, key 0600, units enabled, boot files."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from firmware import staging
from firmware.errors import BuildError
from firmware.profiles import get_profile

REPO = Path(__file__).resolve().parents[2]
EXEC = "/opt/tether/venv/bin/edge run --config /etc/tether/edge.yaml"


def _files(tmp_path: Path) -> staging.BoardFiles:
    key = tmp_path / "tui.edge.key"
    key.write_text("private\n")
    pub = tmp_path / "admin.pub"
    pub.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA admin\n")
    model = tmp_path / "vosk-model-small"
    model.mkdir()
    (model / "conf").write_text("model\n")
    return staging.BoardFiles(
        "tui",
        get_profile("qemu"),
        EXEC,
        REPO / "schemas/bridge/tui.edge.yaml",
        key,
        model,
        None,
        pub,
    )


GROUP = "audio:x:29:tether\nsystemd-journal:x:999:\ntether:x:1000:\n"
GSHADOW = "audio:*::tether\nsystemd-journal:!*::\ntether:!::\n"


def test_board_files(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc/group").write_text(GROUP)
    (tree / "etc/gshadow").write_text(GSHADOW)
    config = staging.write_board_files(tree, _files(tmp_path), 0x0BADCAFE)
    assert (tree / "etc/tether/edge.yaml").read_text() == config
    assert (tree / "etc/tether/device").read_text() == "tui\n"
    half = tree / "etc/tether/tui.edge.yaml"
    assert half.read_bytes() == (REPO / "schemas/bridge/tui.edge.yaml").read_bytes()
    key = (tree / "etc/tether/keys/tui.edge.key").stat()
    assert stat.S_IMODE(key.st_mode) == 0o600 and (key.st_uid, key.st_gid) == (1000, 1000)
    keys = (tree / "etc/tether/keys").stat()
    assert stat.S_IMODE(keys.st_mode) == 0o700
    auth = tree / "home/tether/.ssh/authorized_keys"
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    unit = (tree / "etc/systemd/system/tether-edge.service").read_text()
    assert f"ExecStart={EXEC}\n" in unit and "{exec_start}" not in unit
    assert "TimeoutStartSec=600\n" in unit
    # The spool folders of the qemu profile belong to the service user (the SSH login too).
    for folder in ("audio", "audio/in", "audio/in/done", "audio/in/rejected", "audio/out"):
        info = (tree / "var/lib/tether" / folder).stat()
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (1000, 1000, 0o755)
    assert "systemd-journal:x:999:tether\n" in (tree / "etc/group").read_text()
    assert "systemd-journal:!*::tether\n" in (tree / "etc/gshadow").read_text()
    for name in ("tether-edge.service", "tether-firstboot.service"):
        link = tree / "etc/systemd/system/multi-user.target.wants" / name
        assert os.readlink(link) == f"/etc/systemd/system/{name}"
    for script in ("firstboot", "report-ready"):
        assert os.access(tree / "usr/lib/tether" / script, os.X_OK)
    assert "PARTUUID=0badcafe-02 / ext4" in (tree / "etc/fstab").read_text()
    assert (tree / "etc/hostname").read_text() == "tether-tui\n"
    assert (tree / "opt/tether/models/vosk/vosk-model-small/conf").exists()


def test_group_membership_is_added_once() -> None:
    once = staging.add_group_member(GROUP, "audio", "tether")
    assert once == GROUP
    assert "audio:x:29:tether,edge" in staging.add_group_member(GROUP, "audio", "edge")
    with pytest.raises(BuildError, match="no group 'wheel'"):
        staging.add_group_member(GROUP, "wheel", "tether")


def test_the_carried_half_can_differ_from_the_source(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    files = dataclasses.replace(_files(tmp_path), half_text="bridge: tui\n")
    staging.write_board_files(tree, files, 0x0BADCAFE)
    assert (tree / "etc/tether/tui.edge.yaml").read_text() == "bridge: tui\n"


def test_qemu_boot_files_come_from_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "boot/firmware").mkdir(parents=True)
    (tree / "boot/vmlinuz-6.1.0-1-arm64").write_bytes(b"kernel")
    (tree / "boot/initrd.img-6.1.0-1-arm64").write_bytes(b"initrd")
    staging.boot_files(tree, tmp_path / "boot", get_profile("qemu"), 0x0BADCAFE)
    assert (tmp_path / "boot/vmlinuz").read_bytes() == b"kernel"
    assert (tmp_path / "boot/initrd.img").read_bytes() == b"initrd"
    assert "root=PARTUUID=0badcafe-02" in (tmp_path / "boot/cmdline.txt").read_text()
    with pytest.raises(BuildError, match="no kernel"):
        staging.boot_files(tmp_path / "empty", tmp_path / "boot2", get_profile("qemu"), 1)


def test_rpi_boot_files_are_the_firmware_folder(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "boot/firmware/overlays").mkdir(parents=True)
    (tree / "boot/firmware/config.txt").write_text("arm_64bit=1\n")
    (tree / "boot/firmware/overlays/x.dtbo").write_bytes(b"dtbo")
    staging.boot_files(tree, tmp_path / "boot", get_profile("rpi"), 0x0BADCAFE)
    assert (tmp_path / "boot/config.txt").exists() and (tmp_path / "boot/overlays/x.dtbo").exists()
    assert "console=serial0,115200" in (tmp_path / "boot/cmdline.txt").read_text()
    # The mount point stays, empty: the files live on the FAT partition.
    assert list((tree / "boot/firmware").iterdir()) == []


def test_pin_mtimes_clamps(tmp_path: Path) -> None:
    (tmp_path / "new").write_text("x")
    old = tmp_path / "old"
    old.write_text("y")
    os.utime(old, (1000, 1000))
    staging.pin_mtimes(tmp_path, 5000)
    assert (tmp_path / "new").stat().st_mtime == 5000
    assert old.stat().st_mtime == 1000
