"""The base-system recipe: its cache key, the mmdebstrap command, the host checks."""

from __future__ import annotations

import dataclasses
import gc
import warnings
from pathlib import Path

import pytest

from firmware.errors import BuildError, HostToolError
from firmware.host import ENABLE_BINFMT_HINT, require_tools, source_date_epoch
from firmware.profiles import get_profile
from firmware.rootfs import (
    RootfsSpec,
    _run_streaming,
    cache_paths,
    mmdebstrap_command,
    read_versions,
)


def test_key_follows_the_package_list() -> None:
    qemu = RootfsSpec(get_profile("qemu"))
    assert qemu.key() == RootfsSpec(get_profile("qemu")).key()
    assert qemu.key() != RootfsSpec(get_profile("rpi")).key()
    more = dataclasses.replace(qemu.profile, packages=(*qemu.profile.packages, "vim"))
    assert RootfsSpec(more).key() != qemu.key()
    # The order packages are listed in does not matter; the modules list does.
    shuffled = dataclasses.replace(qemu.profile, packages=tuple(reversed(qemu.profile.packages)))
    assert RootfsSpec(shuffled).key() == qemu.key()
    fewer = dataclasses.replace(qemu.profile, initrd_modules=("ext4",))
    assert RootfsSpec(fewer).key() != qemu.key()


def test_cache_paths_name_profile_suite_arch_and_key(tmp_path: Path) -> None:
    spec = RootfsSpec(get_profile("qemu"))
    tarball, versions = cache_paths(spec, tmp_path)
    assert tarball.name == f"rootfs-qemu-bookworm-arm64-{spec.key()}.tar"
    assert versions.parent == tmp_path


def test_mmdebstrap_command(tmp_path: Path) -> None:
    spec = RootfsSpec(get_profile("rpi"))
    command = mmdebstrap_command(spec, tmp_path / "r.tar", tmp_path, tmp_path / "v")
    assert command[:3] == ["nice", "-n", "10"]
    assert "--arch=arm64" in command
    assert "--components=main,non-free-firmware" in command
    include = next(c for c in command if c.startswith("--include="))
    assert "raspi-firmware" in include and "linux-image-arm64" in include
    assert command[-2:] == ["bookworm", str(tmp_path / "r.tar")]


def test_versions_file(tmp_path: Path) -> None:
    path = tmp_path / "v"
    path.write_text("systemd\t252.39-1~deb12u1\npython3\t3.11.2-1+b1\n\n")
    assert read_versions(path) == {"systemd": "252.39-1~deb12u1", "python3": "3.11.2-1+b1"}
    path.write_text("systemd 252\n")
    with pytest.raises(BuildError, match="v:1: expected"):
        read_versions(path)


def test_host_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HostToolError, match="no-such-tool-here"):
        require_tools("sh", "no-such-tool-here")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert source_date_epoch() == 1_700_000_000
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    with pytest.raises(HostToolError, match="SOURCE_DATE_EPOCH"):
        source_date_epoch()
    assert "update-binfmts --enable qemu-aarch64" in ENABLE_BINFMT_HINT


def test_streaming_a_build_closes_its_pipe(tmp_path: Path) -> None:
    # Only a cold cache runs this (the first rootfs build), so a leak hid behind warm caches.
    lines: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run_streaming(["sh", "-c", "echo one; echo two"], lines.append, tmp_path / "build.log")
        gc.collect()
    assert lines == ["one", "two"]
    assert (tmp_path / "build.log").read_text() == "one\ntwo\n"
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_failed_build_names_its_log_and_last_lines(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"exited 3; log .*build\.log.*\nboom"):
        _run_streaming(["sh", "-c", "echo boom; exit 3"], lambda _l: None, tmp_path / "build.log")
