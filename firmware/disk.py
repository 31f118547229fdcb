"""Build the disk image without loop devices, mounts or device-mapper.

Each filesystem is made in its own file (``mkfs.vfat`` + ``mcopy``,
``mkfs.ext4 -d``), the partition table is written by ``sfdisk`` straight into
the image file, and the filesystems are copied to their offsets with
``dd conv=notrunc``.
"""

from __future__ import annotations

from pathlib import Path

from firmware.errors import BuildError
from firmware.host import run_tool
from firmware.layout import MIB, DiskLayout, Partition

MTOOLS_ENV = {"MTOOLS_SKIP_CHECK": "1", "MTOOLS_NO_VFAT": "0"}


def time_env(epoch: int | None) -> dict[str, str]:
    """Environment that pins the timestamps e2fsprogs and mtools write."""
    if epoch is None:
        return {}
    return {"SOURCE_DATE_EPOCH": str(epoch), "E2FSPROGS_FAKE_TIME": str(epoch)}


def make_fat(
    image: Path, part: Partition, files: Path, *, volume_id: str, label: str, epoch: int | None
) -> None:
    """A FAT32 filesystem of ``part.size`` in ``image`` holding the tree ``files``."""
    image.unlink(missing_ok=True)
    run_tool(
        "boot-fs",
        [
            "mkfs.vfat",
            "-F",
            "32",
            "-n",
            label,
            "-i",
            volume_id,
            "--invariant",
            "-C",
            str(image),
            str(part.size // 1024),
        ],
    )
    entries = sorted(files.iterdir())
    if entries:
        env = {**MTOOLS_ENV, **time_env(epoch)}
        run_tool(
            "boot-fs",
            ["mcopy", "-i", str(image), "-s", "-m", "-Q", *(str(e) for e in entries), "::/"],
            env=env,
        )


def make_ext4(
    image: Path,
    part: Partition,
    tree: Path,
    *,
    fs_uuid: str,
    label: str,
    inodes: int,
    epoch: int | None,
) -> None:
    """An ext4 filesystem of ``part.size`` in ``image`` populated from ``tree`` (``-d``)."""
    image.unlink(missing_ok=True)
    run_tool(
        "root-fs",
        [
            "nice",
            "-n",
            "10",
            "mkfs.ext4",
            "-q",
            "-F",
            "-b",
            "4096",
            "-m",
            "1",
            "-L",
            label,
            "-U",
            fs_uuid,
            "-N",
            str(inodes),
            "-E",
            f"hash_seed={fs_uuid},lazy_itable_init=0,lazy_journal_init=0,nodiscard",
            "-d",
            str(tree),
            str(image),
            f"{part.size // 1024}k",
        ],
        env=time_env(epoch),
    )
    if epoch is not None:
        pin_inode_times(image, inodes, epoch)


def pin_inode_times(image: Path, inodes: int, epoch: int) -> None:
    """Set every inode's ctime/atime/crtime to ``epoch`` (``mkfs.ext4 -d`` copies the
    staging tree's ctimes, which no one can set, so they would differ between builds)."""
    script = "".join(
        f"sif <{n}> {field} @{epoch}\n"
        for n in range(1, inodes + 1)
        for field in ("ctime", "atime", "crtime")
    )
    run_tool("root-fs", ["debugfs", "-w", "-f", "-", str(image)], stdin=script, env=time_env(epoch))


def assemble(disk: Path, layout: DiskLayout, boot_image: Path, root_image: Path) -> None:
    """Write the partition table and both filesystems into the sparse file ``disk``."""
    disk.unlink(missing_ok=True)
    with disk.open("wb") as handle:
        handle.truncate(layout.size)
    run_tool(
        "assemble",
        ["sfdisk", "--no-reread", "--no-tell-kernel", "--wipe", "never", "-q", str(disk)],
        stdin=layout.sfdisk_script(),
    )
    for part, image in ((layout.boot, boot_image), (layout.root, root_image)):
        if image.stat().st_size != part.size:
            raise BuildError(
                "assemble",
                f"{image} is {image.stat().st_size} bytes, partition {part.number} is {part.size}",
            )
        run_tool(
            "assemble",
            [
                "dd",
                f"if={image}",
                f"of={disk}",
                f"bs={4 * MIB}",
                f"seek={part.start}",
                "oflag=seek_bytes",
                "conv=notrunc,sparse",
                "status=none",
            ],
        )
