"""shared.files.write_atomic: a whole new file or the old one, private from the start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from shared.files import write_atomic


def mode(path: Path) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(path.stat().st_mode)


def test_text_and_bytes_replace_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    write_atomic(path, "{}\n")
    assert path.read_text() == "{}\n" and mode(path) == 0o644
    write_atomic(path, "é".encode() * 3)
    assert path.read_bytes() == "ééé".encode()
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_a_private_file_and_the_folder_it_makes_are_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "host"
    write_atomic(path, "secret", private=True, durable=True)
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    path.chmod(0o644)
    write_atomic(path, "secret again", private=True)
    assert mode(path) == 0o600 and path.read_text() == "secret again"


def test_a_failed_write_leaves_the_old_file_and_no_litter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.json"
    write_atomic(path, "old")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]
