"""The data directory: one home at a time, and clients that say what they found."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from home.substrate.datadir import STATE_FILE, DataDirLock, HomeState, find_home, is_locked
from home.substrate.errors import HomeAlreadyRunning
from home.substrate.process import spawn
from shared.errors import HomeNotRunning

STATE = HomeState(
    pid=os.getpid(),
    data_dir="/x",
    nats_url="nats://127.0.0.1:1",
    monitor_url=None,
    started_at="2026-01-01T00:00:00+00:00",
    components={},
)


def test_one_lock_per_data_dir_and_the_second_is_told_who_holds_it(tmp_path: Path) -> None:
    with DataDirLock(tmp_path) as lock:
        assert is_locked(tmp_path)
        with pytest.raises(HomeAlreadyRunning, match=rf"pid {os.getpid()}"):
            DataDirLock(tmp_path).acquire()
        lock.write_state(STATE)
        assert find_home(tmp_path) == STATE
    assert not is_locked(tmp_path)
    assert not (tmp_path / STATE_FILE).exists()


def test_find_home_explains_what_it_found(tmp_path: Path) -> None:
    with pytest.raises(HomeNotRunning, match="no home is running on"):
        find_home(tmp_path)
    (tmp_path / STATE_FILE).write_text(STATE.to_json())
    (tmp_path / "home.lock").write_text("123")
    with pytest.raises(HomeNotRunning, match="left over from a home that is no longer running"):
        find_home(tmp_path)


def test_a_new_home_removes_a_stale_state_file_at_once(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(STATE.to_json())
    with DataDirLock(tmp_path):
        assert not (tmp_path / STATE_FILE).exists()


def test_an_unreadable_state_file_is_named(tmp_path: Path) -> None:
    with DataDirLock(tmp_path):
        (tmp_path / STATE_FILE).write_text("{not json")
        with pytest.raises(HomeNotRunning, match=r"home\.json is not a readable home state file"):
            find_home(tmp_path)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_dir_is_private_even_if_it_existed(tmp_path: Path) -> None:
    """Before: 0755, and the memories below it were readable by any local user."""
    data = tmp_path / "home"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with DataDirLock(data):
        assert _mode(data) == 0o700
    fresh = tmp_path / "fresh" / "home"
    with DataDirLock(fresh):
        assert _mode(fresh) == 0o700


async def test_component_logs_are_private(tmp_path: Path) -> None:
    log_path = tmp_path / "logs" / "child.log"
    previous = os.umask(0o022)
    try:
        proc = await spawn([sys.executable, "-c", "pass"], env={}, log_path=log_path)
        await proc.wait()
    finally:
        os.umask(previous)
    assert _mode(log_path) == 0o600
    assert _mode(log_path.parent) == 0o700
