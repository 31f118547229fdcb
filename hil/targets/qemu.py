"""The qemu target: a firmware image booted under qemu-system-aarch64, then driven as a real board.

``firmware.boottest.booted`` boots the image (user networking, SSH forwarded to
a free loopback port) and waits for the edge unit's readiness line and an SSH
banner. Before qemu starts, hil puts two keys on *that boot's scratch copy* of
the disk (the image file is never changed): a host key for the board's sshd,
whose public half is then the pinned key, and a login key for root (with
``--key``, hil logs in as ``tether`` with the image's own key instead). First boot
keeps a host key that is already there (it only makes one when none exists),
so the key hil pins is the one the board presents. Then the same
:class:`SshBoard` as for ``ssh://`` drives it, at 127.0.0.1:forwarded-port.

Inside qemu, home on this machine is 10.0.2.2 (user networking's host alias):
pair the image's device with ``--home 10.0.2.2:PORT`` to bridge it.
"""

from __future__ import annotations

import subprocess
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

from firmware.boottest import booted
from firmware.errors import FirmwareError
from firmware.flash import image_manifest
from firmware.manifest import Manifest
from hil.runner import HilError
from hil.targets.address import SshAddress
from hil.targets.ssh import SshBoard, SshBoardOptions
from hil.targets.sshlink import HostKeyPin

BOOT_LIMIT_S = 900.0
IMAGE_USER = "tether"  # whom `firmware build --ssh-key PUB` lets log in
QEMU_HOME = "10.0.2.2"


def _keygen(path: Path, comment: str) -> str:
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return path.with_suffix(".pub").read_text().strip()


def seed_keys(raw: Path, manifest: Manifest, keys: Path) -> tuple[Path, str]:
    """Put a fresh host key and root login key on the scratch disk ``raw``.

    Returns the login key's path and the host key line to pin.
    """
    root = next((p for p in manifest.partitions if p.filesystem == "ext4"), None)
    if root is None:
        raise HilError(f"the manifest of device {manifest.device} lists no ext4 root partition")
    keys.mkdir(parents=True, exist_ok=True)
    host_pub = _keygen(keys / "ssh_host_ed25519_key", "hil-qemu-host")
    login_pub = _keygen(keys / "login_ed25519", "hil-qemu-login")
    authorized = keys / "authorized_keys"
    authorized.write_text(login_pub + "\n")
    for path in (keys / "ssh_host_ed25519_key", authorized):
        path.chmod(0o600)
    # debugfs goes on past a failing line (an rm of a file that is not there, a mkdir of
    # one that is); what counts is checked below.
    script = "\n".join(
        [
            "rm /etc/ssh/ssh_host_ed25519_key",
            "rm /etc/ssh/ssh_host_ed25519_key.pub",
            f"write {keys / 'ssh_host_ed25519_key'} /etc/ssh/ssh_host_ed25519_key",
            f"write {keys / 'ssh_host_ed25519_key.pub'} /etc/ssh/ssh_host_ed25519_key.pub",
            "mkdir /root/.ssh",
            "sif /root/.ssh mode 040700",
            "rm /root/.ssh/authorized_keys",
            f"write {authorized} /root/.ssh/authorized_keys",
            "",
        ]
    )
    target = f"{raw}?offset={root.start}"
    subprocess.run(
        ["debugfs", "-w", "-f", "-", target],
        input=script, text=True, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    for placed in ("/etc/ssh/ssh_host_ed25519_key", "/root/.ssh/authorized_keys"):
        stat = subprocess.run(
            ["debugfs", "-R", f"stat {placed}", target],
            text=True, capture_output=True, check=False, timeout=60,
        )  # fmt: skip
        if "Mode:  0600" not in stat.stdout:
            raise HilError(f"could not put {placed} on the scratch disk: {stat.stderr.strip()}")
    return keys / "login_ed25519", " ".join(host_pub.split()[:2])


class QemuBoard:
    """Boots ``image`` and yields the :class:`SshBoard` on it; open with ``async with``."""

    def __init__(
        self,
        image: Path,
        work_dir: Path,
        options: SshBoardOptions,
        *,
        limit_s: float = BOOT_LIMIT_S,
    ) -> None:
        self.image = image
        self.work_dir = work_dir
        self.options = options
        self.limit_s = limit_s
        self.console_log = work_dir / "console.log"
        self._stack = AsyncExitStack()
        self._seeded: tuple[Path, str] | None = None

    async def __aenter__(self) -> SshBoard:
        try:
            manifest = image_manifest(self.image)
        except FirmwareError as exc:
            raise HilError(f"cannot boot {self.image}: {exc}") from exc
        self.work_dir.mkdir(parents=True, exist_ok=True)

        def seed(raw: Path) -> None:
            self._seeded = seed_keys(raw, manifest, self.work_dir / "keys")

        try:
            board = await self._stack.enter_async_context(
                booted(
                    self.image, manifest, limit_s=self.limit_s, console_log=self.console_log,
                    seed=seed,
                )
            )  # fmt: skip
            if self._seeded is None:
                raise HilError("the scratch disk was never seeded with keys")
            login_key, host_key = self._seeded
            pin = HostKeyPin(host_key=host_key)
            if self.options.key is not None or self.options.use_agent:
                # The image's own login (firmware build --ssh-key PUB): the edge's user.
                options = replace(self.options, pin=pin)
                address = SshAddress(IMAGE_USER, "127.0.0.1", board.ssh_port)
            else:
                options = replace(self.options, key=login_key, pin=pin)
                address = SshAddress("root", "127.0.0.1", board.ssh_port)
            return await self._stack.enter_async_context(
                SshBoard(address, self.work_dir / "ssh", options)
            )
        except FirmwareError as exc:
            await self._stack.aclose()
            raise HilError(f"{self.image} did not boot: {exc}") from exc
        except BaseException:
            await self._stack.aclose()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()
