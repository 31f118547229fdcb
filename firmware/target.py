"""What a flash target is: block device or file, its size, whether it is mounted or holds ``/``.

:func:`probe` gathers the facts from the system (``stat``, ``/sys/dev/block``,
``/proc/self/mounts``); :func:`refusals` is pure and decides from them. The
system paths are parameters so tests can describe a fake block device (a
``mknod`` node plus a small sysfs tree) without loop devices.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MAX_BYTES = 128 * 1024**3


@dataclass(frozen=True)
class SystemPaths:
    """Where the kernel tells about block devices, mounts and the root filesystem."""

    sysfs: Path = Path("/sys")
    mounts: Path = Path("/proc/self/mounts")
    root: Path = Path("/")


@dataclass(frozen=True)
class TargetFacts:
    """Everything the refusal rules look at."""

    path: Path
    exists: bool
    is_block: bool
    is_regular: bool
    size: int | None
    mounted_at: list[str] = field(default_factory=list)
    holds_root: bool = False


def _devno(value: int) -> str:
    return f"{os.major(value)}:{os.minor(value)}"


def _disk_of(devno: str, sysfs: Path) -> str:
    """The whole disk a partition belongs to (a disk is its own)."""
    node = sysfs / "dev" / "block" / devno
    if (node / "partition").exists():
        parent = node.resolve().parent / "dev"
        if parent.exists():
            return parent.read_text().strip()
    return devno


def _block_size(devno: str, sysfs: Path) -> int | None:
    size_file = sysfs / "dev" / "block" / devno / "size"
    try:
        return int(size_file.read_text().strip()) * 512
    except (OSError, ValueError):
        return None


def _mount_sources(mounts: Path) -> list[tuple[str, str]]:
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return []
    return [(parts[0], parts[1]) for parts in (line.split() for line in lines) if len(parts) > 1]


def probe(path: Path, system: SystemPaths = SystemPaths()) -> TargetFacts:
    """Look at ``path`` and the system around it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return TargetFacts(path, exists=False, is_block=False, is_regular=False, size=None)
    if not stat.S_ISBLK(info.st_mode):
        regular = stat.S_ISREG(info.st_mode)
        return TargetFacts(path, True, False, regular, info.st_size if regular else None)
    devno = _devno(info.st_rdev)
    disk = _disk_of(devno, system.sysfs)
    mounted = []
    for source, where in _mount_sources(system.mounts):
        try:
            source_info = os.stat(source)
        except OSError:
            continue
        if stat.S_ISBLK(source_info.st_mode):
            source_dev = _devno(source_info.st_rdev)
            if source_dev == devno or _disk_of(source_dev, system.sysfs) == devno:
                mounted.append(where)
    root_dev = _devno(os.stat(system.root).st_dev)
    holds_root = devno == root_dev or disk == _disk_of(root_dev, system.sysfs)
    return TargetFacts(
        path, True, True, False, _block_size(devno, system.sysfs), mounted, holds_root
    )


def refusals(
    facts: TargetFacts, image_size: int, *, to_file: bool, max_bytes: int, allow_large: bool
) -> list[str]:
    """Every reason not to write ``image_size`` bytes to the target (empty: go ahead)."""
    where = str(facts.path)
    if not facts.is_block:
        if not to_file:
            kind = "does not exist" if not facts.exists else "is not a block device"
            return [f"{where} {kind}; pass --to-file to write the image to a regular file"]
        if facts.exists and not facts.is_regular:
            return [f"{where} is neither a block device nor a regular file"]
        return []
    reasons = []
    if facts.holds_root:
        reasons.append(f"{where} is (on) the disk holding this system's root filesystem '/'")
    if facts.mounted_at:
        reasons.append(f"{where} is mounted (at {', '.join(facts.mounted_at)}); unmount it first")
    if facts.size is None:
        reasons.append(f"cannot tell the size of {where}")
    else:
        if facts.size > max_bytes and not allow_large:
            reasons.append(
                f"{where} is {facts.size / 1024**3:.1f} GiB, over the "
                f"{max_bytes / 1024**3:.0f} GiB limit for an SD card; "
                "pass --allow-large if it really is the card"
            )
        if facts.size < image_size:
            reasons.append(f"{where} is {facts.size} bytes, smaller than the image ({image_size})")
    return reasons
