"""The disk layout: an MBR with a FAT32 boot partition and an ext4 root, as pure arithmetic.

Nothing here touches a file. :mod:`firmware.disk` turns a :class:`DiskLayout`
into bytes (``sfdisk`` on an image file, ``dd conv=notrunc``), and the tests
check what ``sfdisk --json`` reads back against it.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from firmware.errors import LayoutError

SECTOR = 512
MIB = 1024 * 1024
ALIGN = MIB
DEFAULT_BOOT_MIB = 256
# FAT32 needs at least 65525 clusters; with 512-byte clusters that is ~32 MiB.
MIN_BOOT_MIB = 64
# Free room left in the root filesystem at build time; first boot grows it to the card.
ROOT_SLACK_FRACTION = 0.15
ROOT_SLACK_MIN_MIB = 192

FAT32_LBA = "c"
LINUX = "83"


@dataclass(frozen=True)
class Partition:
    """One MBR partition, in bytes from the start of the disk."""

    number: int
    start: int
    size: int
    type_code: str
    bootable: bool

    @property
    def end(self) -> int:
        """The first byte after the partition."""
        return self.start + self.size


@dataclass(frozen=True)
class DiskLayout:
    """The whole disk: its identifier, two partitions and its size."""

    disk_id: int
    boot: Partition
    root: Partition

    @property
    def size(self) -> int:
        """The image size in bytes: the end of the root partition."""
        return self.root.end

    def partuuid(self, number: int) -> str:
        """The kernel's PARTUUID for partition ``number`` of this disk."""
        return partuuid(self.disk_id, number)

    def sfdisk_script(self) -> str:
        """The script ``sfdisk`` reads to write this partition table."""
        lines = [
            "label: dos",
            f"label-id: 0x{self.disk_id:08x}",
            "unit: sectors",
            f"sector-size: {SECTOR}",
            "",
        ]
        for part in (self.boot, self.root):
            fields = [
                f"start={part.start // SECTOR}",
                f"size={part.size // SECTOR}",
                f"type={part.type_code}",
            ]
            if part.bootable:
                fields.append("bootable")
            lines.append(", ".join(fields))
        return "\n".join(lines) + "\n"


def partuuid(disk_id: int, number: int) -> str:
    """The kernel's PARTUUID for an MBR partition: ``<disk id>-<nn>``."""
    return f"{disk_id:08x}-{number:02d}"


def round_up(value: int, unit: int) -> int:
    """``value`` rounded up to a multiple of ``unit``."""
    return -(-value // unit) * unit


def root_size_for(content_bytes: int) -> int:
    """A root partition size that holds ``content_bytes`` of files plus working room."""
    if content_bytes < 0:
        raise LayoutError(f"content size must not be negative, got {content_bytes}")
    slack = max(int(content_bytes * ROOT_SLACK_FRACTION), ROOT_SLACK_MIN_MIB * MIB)
    return round_up(content_bytes + slack, ALIGN)


def plan_layout(disk_id: int, root_bytes: int, boot_mib: int = DEFAULT_BOOT_MIB) -> DiskLayout:
    """Place the boot partition at 1 MiB and the root right after it, both MiB-aligned."""
    if not 0 < disk_id < 2**32:
        raise LayoutError(f"the MBR disk id must be a non-zero 32-bit value, got {disk_id:#x}")
    if boot_mib < MIN_BOOT_MIB:
        raise LayoutError(
            f"a FAT32 boot partition needs at least {MIN_BOOT_MIB} MiB, got {boot_mib}"
        )
    if root_bytes <= 0 or root_bytes % ALIGN:
        raise LayoutError(
            f"the root partition must be a positive multiple of 1 MiB, got {root_bytes}"
        )
    boot = Partition(1, ALIGN, boot_mib * MIB, FAT32_LBA, bootable=True)
    root = Partition(2, boot.end, root_bytes, LINUX, bootable=False)
    return DiskLayout(disk_id, boot, root)


def disk_id_for(device: str) -> int:
    """A stable MBR disk id for a board, so its PARTUUIDs are the same on every build."""
    value = int.from_bytes(hashlib.sha256(f"tether-disk:{device}".encode()).digest()[:4], "big")
    return value or 1


def fs_uuid_for(device: str, role: str) -> str:
    """A stable filesystem UUID for ``role`` (``root``) of a board's image."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tether:{device}:{role}"))


def fat_volume_id_for(device: str) -> str:
    """A stable FAT volume id (8 hex digits) for a board's boot partition."""
    return hashlib.sha256(f"tether-fat:{device}".encode()).hexdigest()[:8]
