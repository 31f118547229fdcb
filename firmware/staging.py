"""The board's root tree: the cached base system plus this board's venv, config, keys and units.

The tree is a plain folder (extracted as root with numeric owners); the only
arm64 code run here is the board's own Python making its venv and installing
the wheelhouse into it, through qemu-user-static and ``chroot``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from firmware.errors import BuildError
from firmware.host import run_tool
from firmware.layout import partuuid
from firmware.profiles import Profile

VENV = "/opt/tether/venv"
MODELS = "/opt/tether/models"
ETC = "/etc/tether"
KEYS = "/etc/tether/keys"
STATE = "/var/lib/tether"
SPOOL_IN = "/var/lib/tether/audio/in"
SPOOL_OUT = "/var/lib/tether/audio/out"
BOARD_UID = 1000
BOARD_GID = 1000
UNIT_DIR = "etc/systemd/system"
WANTS = "etc/systemd/system/multi-user.target.wants"


@dataclass(frozen=True)
class BoardFiles:
    """The per-board inputs that go into the tree."""

    device: str
    profile: Profile
    exec_start: str
    bridge_half: Path | None
    board_key: Path | None
    vosk_model: Path | None
    voice: str | None
    ssh_key: Path | None
    # The half as the board carries it (its home address possibly rewritten);
    # None: the file at ``bridge_half`` as it is.
    half_text: str | None = None

    def carried_half(self) -> bytes | None:
        """The bytes of ``/etc/tether/DEVICE.edge.yaml`` on the board."""
        if self.half_text is not None:
            return self.half_text.encode()
        return self.bridge_half.read_bytes() if self.bridge_half is not None else None


def board_file(name: str) -> bytes:
    """A file shipped in :mod:`firmware.board`."""
    return resources.files("firmware.board").joinpath(name).read_bytes()


def extract_rootfs(tarball: Path, tree: Path) -> None:
    """Unpack the cached base system into the empty folder ``tree``."""
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    run_tool(
        "stage",
        [
            "tar",
            "--extract",
            "--file",
            str(tarball),
            "--directory",
            str(tree),
            "--numeric-owner",
            "--preserve-permissions",
            "--xattrs",
            "--xattrs-include=*",
        ],
    )


def _chroot(tree: Path, command: list[str], epoch: int | None) -> None:
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_CACHE_DIR": "1",
    }
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = str(epoch)
    result = subprocess.run(
        ["nice", "-n", "10", "chroot", str(tree), *command],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BuildError(
            "venv",
            f"{' '.join(command)} (in the board's chroot) exited "
            f"{result.returncode}:\n{result.stderr.strip()[-3000:]}",
        )


def install_venv(tree: Path, wheelhouse: Path, requirements: list[str], epoch: int | None) -> None:
    """Make the board's venv and install ``requirements`` from ``wheelhouse``, offline."""
    inside = tree / "tmp" / "wheelhouse"
    shutil.rmtree(inside, ignore_errors=True)
    shutil.copytree(wheelhouse, inside)
    try:
        _chroot(tree, ["/usr/bin/python3", "-m", "venv", VENV], epoch)
        _chroot(
            tree,
            [
                f"{VENV}/bin/pip",
                "install",
                "--no-index",
                "--find-links",
                "/tmp/wheelhouse",
                "--no-compile",
                "--quiet",
                *requirements,
            ],
            epoch,
        )
    finally:
        shutil.rmtree(inside, ignore_errors=True)
    # pip leaves bytecode of itself behind when it runs; it is rebuilt on the board.
    for cache in (tree / VENV.lstrip("/")).rglob("__pycache__"):
        shutil.rmtree(cache)


def _write(
    tree: Path, path: str, data: bytes | str, mode: int = 0o644, owner: tuple[int, int] = (0, 0)
) -> Path:
    target = tree / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chown(target, *owner)
    os.chmod(target, mode)
    return target


def _enable(tree: Path, unit: str) -> None:
    link = tree / WANTS / unit
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(f"/{UNIT_DIR}/{unit}")


def edge_config_text(files: BoardFiles) -> str:
    """``/etc/tether/edge.yaml`` for this board."""
    lines = [
        "# Written by `firmware build`; read by the board's edge service.",
        f"device: {files.device}",
    ]
    if files.profile.audio == "spool":
        lines += [
            "# No sound card: a harness drops 16-bit mono WAV files into audio.input.dir",
            "# (write NAME.tmp, then rename it to NAME.wav) and reads each playback from",
            "# audio.output.dir (NNNNNN-LABEL.wav + .json). See edge/audio/spool.py.",
            "audio:",
            f"  input: {{kind: spool, dir: {SPOOL_IN}}}",
            f"  output: {{kind: spool, dir: {SPOOL_OUT}}}",
        ]
    else:
        # A board in a room hears radios and neighbours: a turn starts with the wake word,
        # or follows an answer (edge/board.example.yaml). The spool harness sends turns
        # without one, so the emulated board keeps voice activity.
        lines.append("endpointing: {mode: wake, wake: {model: okay_nabu}}")
    if files.bridge_half is not None:
        # The half and keys are read-only config; the outbox is state the edge writes.
        half = f"{ETC}/{files.device}.edge.yaml"
        lines.append(f"bridge: {{half: {half}, secrets: {KEYS}, outbox: {STATE}/outbox}}")
    if files.vosk_model is not None:
        lines.append(f"asr: {{model: {MODELS}/vosk/{files.vosk_model.name}}}")
    if files.voice is not None:
        lines.append(f"tts: {{voice: 'package:{files.voice}'}}")
    return "\n".join(lines) + "\n"


def fstab_text(disk_id: int) -> str:
    """``/etc/fstab``: root and the boot partition, by PARTUUID."""
    return (
        f"PARTUUID={partuuid(disk_id, 2)} / ext4 defaults,noatime 0 1\n"
        # nofail: a bad boot partition must not hold the board in emergency mode.
        f"PARTUUID={partuuid(disk_id, 1)} /boot/firmware vfat "
        "defaults,noatime,umask=0077,nofail 0 0\n"
    )


def cmdline_text(profile: Profile, disk_id: int) -> str:
    """The kernel command line (``cmdline.txt`` on the boot partition)."""
    return (
        f"{profile.cmdline_console} root=PARTUUID={partuuid(disk_id, 2)} rootfstype=ext4 "
        "rootwait fsck.repair=yes systemd.show_status=1 net.ifnames=0\n"
    )


def _board_dir(tree: Path, path: str, mode: int) -> None:
    folder = tree / path.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, BOARD_UID, BOARD_GID)
    os.chmod(folder, mode)


def add_group_member(table: str, group: str, user: str) -> str:
    """``/etc/group`` or ``/etc/gshadow`` text with ``user`` in ``group`` (members: 4th field)."""
    lines = table.splitlines()
    for index, line in enumerate(lines):
        fields = line.split(":")
        if fields[0] == group and len(fields) == 4:
            members = [m for m in fields[3].split(",") if m]
            if user not in members:
                fields[3] = ",".join([*members, user])
            lines[index] = ":".join(fields)
            return "\n".join(lines) + "\n"
    raise BuildError("stage", f"the base system has no group {group!r}")


def unit_text(files: BoardFiles) -> str:
    """``tether-edge.service`` with this board's command and start timeout."""
    return (
        board_file("tether-edge.service")
        .decode()
        .replace("{exec_start}", files.exec_start)
        .replace("{start_timeout_s}", str(files.profile.start_timeout_s))
    )


def write_board_files(tree: Path, files: BoardFiles, disk_id: int) -> str:
    """Write config, keys, units and first boot into ``tree``; return the edge config text."""
    board = (BOARD_UID, BOARD_GID)
    config = edge_config_text(files)
    _write(tree, f"{ETC}/edge.yaml", config)
    _write(tree, f"{ETC}/device", files.device + "\n")
    half = files.carried_half()
    if half is not None:
        _write(tree, f"{ETC}/{files.device}.edge.yaml", half)
    keys = tree / KEYS.lstrip("/")
    keys.mkdir(parents=True, exist_ok=True)
    os.chown(keys, *board)
    os.chmod(keys, 0o700)
    if files.board_key is not None:
        _write(tree, f"{KEYS}/{files.device}.edge.key", files.board_key.read_bytes(), 0o600, board)
    if files.vosk_model is not None:
        target = tree / MODELS.lstrip("/") / "vosk" / files.vosk_model.name
        shutil.copytree(files.vosk_model, target, dirs_exist_ok=True)
    if files.ssh_key is not None:
        home = tree / "home/tether/.ssh"
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, *board)
        os.chmod(home, 0o700)
        _write(tree, "/home/tether/.ssh/authorized_keys", files.ssh_key.read_bytes(), 0o600, board)
    _board_dir(tree, STATE, 0o750)
    if files.profile.audio == "spool":
        # Owned by the service user, who is also the SSH login a harness uses.
        for folder in (f"{STATE}/audio", SPOOL_IN, f"{SPOOL_IN}/done", f"{SPOOL_IN}/rejected"):
            _board_dir(tree, folder, 0o755)
        _board_dir(tree, SPOOL_OUT, 0o755)
    # The board's login (tether) reads its own service's journal: journalctl -u tether-edge.
    for name in ("etc/group", "etc/gshadow"):
        table = tree / name
        if table.exists():
            table.write_text(add_group_member(table.read_text(), "systemd-journal", "tether"))
    _write(tree, f"/{UNIT_DIR}/tether-edge.service", unit_text(files))
    _write(tree, f"/{UNIT_DIR}/tether-firstboot.service", board_file("tether-firstboot.service"))
    _write(tree, "/usr/lib/tether/firstboot", board_file("firstboot.sh"), 0o755)
    _write(tree, "/usr/lib/tether/report-ready", board_file("report-ready.sh"), 0o755)
    _write(tree, "/etc/systemd/network/20-wired.network", board_file("20-wired.network"))
    _write(tree, "/etc/ssh/sshd_config.d/tether.conf", board_file("sshd-tether.conf"))
    _write(tree, "/etc/fstab", fstab_text(disk_id))
    _write(tree, "/etc/hostname", f"tether-{files.device}\n")
    _enable(tree, "tether-edge.service")
    _enable(tree, "tether-firstboot.service")
    return config


def boot_files(tree: Path, target: Path, profile: Profile, disk_id: int) -> None:
    """Fill ``target`` with what goes on the FAT boot partition, and empty its mount point."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    firmware_dir = tree / "boot/firmware"
    if profile.name == "rpi":
        # raspi-firmware's kernel hooks copied the Pi's boot files, kernel and initrd here.
        for entry in sorted(firmware_dir.iterdir()):
            destination = target / entry.name
            if entry.is_dir():
                shutil.copytree(entry, destination)
            else:
                shutil.copy2(entry, destination)
    else:
        kernels = sorted((tree / "boot").glob("vmlinuz-*"))
        initrds = sorted((tree / "boot").glob("initrd.img-*"))
        if not kernels or not initrds:
            raise BuildError("boot-fs", f"no kernel/initrd in {tree / 'boot'}")
        shutil.copy2(kernels[-1], target / "vmlinuz")
        shutil.copy2(initrds[-1], target / "initrd.img")
    (target / "cmdline.txt").write_text(cmdline_text(profile, disk_id))
    shutil.rmtree(firmware_dir, ignore_errors=True)
    firmware_dir.mkdir(parents=True)


def tree_size(tree: Path) -> tuple[int, int]:
    """Bytes (in 4 KiB blocks) and entries under ``tree``, as ``mkfs.ext4 -d`` will need them."""
    total = 0
    count = 0
    for root, dirs, names in os.walk(tree):
        for name in dirs + names:
            count += 1
            info = os.lstat(os.path.join(root, name))
            total += -(-info.st_size // 4096) * 4096
    return total, count


def pin_mtimes(tree: Path, epoch: int) -> None:
    """Clamp every mtime in ``tree`` to ``epoch`` (no later than), for reproducible images."""
    for root, dirs, names in os.walk(tree):
        for name in dirs + names:
            path = os.path.join(root, name)
            if os.lstat(path).st_mtime > epoch:
                os.utime(path, (epoch, epoch), follow_symlinks=False)
    os.utime(tree, (epoch, epoch))
