"""A small real filesystem for full-disk and read-only tests.

``small_filesystem(path, size_kib)`` mounts one at ``path`` (root, as `make test` runs;
the kernel enforces the size, for root too) and unmounts it when the block ends.
:meth:`SmallFs.fill` writes a ballast file until the kernel says ENOSPC and
:meth:`SmallFs.free` removes it: a full disk. With ``can_fail`` it is a loop-mounted
ext4 instead, which :meth:`SmallFs.turn_read_only` turns read-only under the files
open on it, as a failing disk does (a plain remount refuses while files are open).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

CHUNK = 64 * 1024


class SmallFs:
    """A mounted size-limited tmpfs at :attr:`path`."""

    def __init__(self, path: Path, device: str | None = None) -> None:
        self.path = path
        self.device = device  # the loop device of an ext4 one
        self.ballast = path / ".ballast"

    def fill(self) -> int:
        """Write the ballast until the filesystem is full; the bytes it took."""
        written = 0
        with self.ballast.open("ab", buffering=0) as out:
            # Big chunks, then smaller ones, so nothing at all is left.
            for size in (CHUNK, 4096, 512, 1):
                while True:
                    try:
                        took = out.write(b"\0" * size)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
                    written += took or 0
                    if not took:
                        break
        return written

    def free(self) -> None:
        """Remove the ballast."""
        self.ballast.unlink(missing_ok=True)

    def free_bytes(self) -> int:
        """What ``statvfs`` says is left."""
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def turn_read_only(self) -> None:
        """Make the filesystem read-only under its open files, as a failing disk does:
        ext4 remounts itself read-only on an error (``errors=remount-ro``), and stays so
        until it is unmounted. Only a ``can_fail`` filesystem can."""
        if self.device is None:
            pytest.fail("turn_read_only needs small_filesystem(..., can_fail=True)")
        trigger = Path("/sys/fs/ext4") / Path(self.device).name / "trigger_fs_error"
        trigger.write_text("1\n")


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], check=False, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.fail(f"mount {' '.join(args)} failed (the tests run as root): {done.stderr}")


@contextlib.contextmanager
def small_filesystem(path: Path, size_kib: int, *, can_fail: bool = False) -> Iterator[SmallFs]:
    """A ``size_kib`` filesystem mounted at ``path`` (made if missing) for the block: a
    tmpfs, or with ``can_fail`` an ext4 image on a loop device that
    :meth:`SmallFs.turn_read_only` can fail."""
    path.mkdir(parents=True, exist_ok=True)
    device = None
    if can_fail:
        image = path.with_name(path.name + ".ext4")
        with image.open("wb") as out:
            out.truncate(size_kib * 1024)
        mkfs = ["mkfs.ext4", "-q", "-m", "0", "-F", str(image)]
        done = subprocess.run(mkfs, check=False, capture_output=True, timeout=60)
        if done.returncode != 0:
            pytest.fail(f"mkfs.ext4 {image} failed: {done.stderr.decode(errors='replace')}")
        _mount("-o", "loop,errors=remount-ro", str(image), str(path))
        found = ["findmnt", "-n", "-o", "SOURCE", str(path)]
        device = subprocess.run(found, check=True, capture_output=True, text=True).stdout.strip()
    else:
        _mount("-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700", "tether-small-fs", str(path))
    try:
        yield SmallFs(path, device)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, timeout=30)
