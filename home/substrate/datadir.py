"""One data directory per home: an exclusive lock and a state file with its addresses.

``home up`` holds ``home.lock`` (``flock``) for as long as it runs and writes
``home.json`` once it is up; every other ``home`` subcommand reads ``home.json``
to find the running home, so several homes can run side by side on one machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from home.substrate.errors import HomeAlreadyRunning
from shared.errors import HomeNotRunning
from shared.home_state import STATE_FILE, HomeState, HomeStateError

__all__ = ["LOCK_FILE", "STATE_FILE", "DataDirLock", "HomeState", "find_home", "is_locked"]

LOCK_FILE = "home.lock"


class DataDirLock:
    """The exclusive hold ``home up`` keeps on its data directory while it runs."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise HomeAlreadyRunning naming the holder."""
        # Private: memories, logs and tokens all live below it.
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        handle = (self.data_dir / LOCK_FILE).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise HomeAlreadyRunning(
                f"a home is already running on {self.data_dir} (pid {holder}); "
                "stop it first (Ctrl-C or SIGTERM) or choose another --data-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle
        # A state file left by a home that was killed names addresses nobody serves.
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / STATE_FILE).unlink()

    def release(self) -> None:
        """Remove the state file and drop the lock."""
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / STATE_FILE).unlink()
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def write_state(self, state: HomeState) -> None:
        """Publish the running home's addresses atomically."""
        state.save(self.data_dir)

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_locked(data_dir: Path) -> bool:
    """True while some process holds the data directory's lock."""
    path = data_dir / LOCK_FILE
    if not path.exists():
        return False
    with path.open("a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def find_home(data_dir: Path) -> HomeState:
    """The running home on ``data_dir``, or HomeNotRunning saying what was found instead."""
    path = data_dir / STATE_FILE
    if not path.exists():
        raise HomeNotRunning(
            f"no home is running on {data_dir} (no {STATE_FILE}); "
            f"start one with: home up --data-dir {data_dir}"
        )
    if not is_locked(data_dir):
        raise HomeNotRunning(
            f"{path} is left over from a home that is no longer running; "
            f"start one with: home up --data-dir {data_dir}"
        )
    try:
        return HomeState.load(data_dir)
    except HomeStateError as exc:
        raise HomeNotRunning(str(exc)) from exc
