"""Board profiles: what each kind of image carries and how its kernel is told to boot.

A profile is data: the Debian packages of its root filesystem, the kernel
modules its small initrd lists (``MODULES=list``), and the serial console the
kernel command line names. The root filesystem cache is keyed on exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AudioKind = Literal["sounddevice", "spool"]

SUITE = "bookworm"
ARCH = "arm64"
COMPONENTS = ("main", "non-free-firmware")

# Every board: an init, an SSH server, the Python the edge venv is built on, the
# tools first boot uses to grow the root partition, and the audio libraries the
# edge's wheels link against.
BASE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "udev",
    "dbus",
    "kmod",
    "openssh-server",
    "python3",
    "python3-venv",
    "iproute2",
    "fdisk",
    "e2fsprogs",
    "initramfs-tools",
    "zstd",
    "libasound2",
    "libportaudio2",
    "libatomic1",  # vosk's aarch64 libvosk.so links against it
    "linux-image-arm64",
)

# The initrd only has to find the root filesystem: virtio for the emulated
# board, the SD host controllers for the Raspberry Pi, ext4 for both.
VIRTIO_MODULES = ("virtio_pci", "virtio_mmio", "virtio_blk", "virtio_scsi")
SD_MODULES = ("mmc_block", "sdhci", "sdhci_pltfm", "sdhci_iproc", "bcm2835", "bcm2835_dma")
FS_MODULES = ("ext4", "crc32c_generic")


@dataclass(frozen=True)
class Profile:
    """One kind of board image."""

    name: str
    packages: tuple[str, ...]
    initrd_modules: tuple[str, ...]
    console: str
    description: str
    # sounddevice: the board's sound card; spool: folders a harness drives (no sound card).
    audio: AudioKind
    # How long systemd lets the edge take to send READY=1: loading the Vosk model and
    # rendering the notice with Piper take seconds on a Pi, minutes under TCG emulation.
    start_timeout_s: int

    @property
    def cmdline_console(self) -> str:
        """The ``console=`` part of the kernel command line."""
        return f"console={self.console}"


PROFILES: dict[str, Profile] = {
    "qemu": Profile(
        name="qemu",
        packages=BASE_PACKAGES,
        initrd_modules=VIRTIO_MODULES + FS_MODULES,
        console="ttyAMA0",
        description="qemu-system-aarch64 'virt' machine: virtio disk, PL011 serial",
        audio="spool",
        start_timeout_s=600,
    ),
    "rpi": Profile(
        name="rpi",
        packages=(*BASE_PACKAGES, "raspi-firmware", "firmware-brcm80211"),
        initrd_modules=SD_MODULES + VIRTIO_MODULES + FS_MODULES,
        console="serial0,115200 console=tty1",
        description="Raspberry Pi 3/4 (arm64): Debian kernel, raspi-firmware boot files",
        audio="sounddevice",
        start_timeout_s=300,
    ),
}


def get_profile(name: str) -> Profile:
    """The profile called ``name``; KeyError lists the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None
