"""Target names on the command line: ``virtual``, ``ssh://user@host[:port]``, ``qemu:IMAGE``.

Pure parsing, no I/O: a bad name is a :class:`BadTarget` that says what was
expected, so the CLI can exit 2 with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from hil.runner import HilError
from shared.errors import InputError

SSH_PORT = 22


class BadTarget(HilError, InputError):
    """A ``--target`` value that names no target this version can drive."""


@dataclass(frozen=True)
class SshAddress:
    """Where a board's sshd answers, and the user to log in as."""

    user: str
    host: str
    port: int = SSH_PORT

    def __str__(self) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """The host as OpenSSH writes it in known_hosts (``[host]:port`` off port 22)."""
        return self.host if self.port == SSH_PORT else f"[{self.host}]:{self.port}"


@dataclass(frozen=True)
class VirtualTarget:
    """The board made of this machine's processes."""


@dataclass(frozen=True)
class QemuTarget:
    """A firmware image to boot under qemu-system-aarch64."""

    image: Path


Target = VirtualTarget | SshAddress | QemuTarget


def parse_target(text: str) -> Target:
    """The target ``text`` names; BadTarget with the accepted forms if none."""
    if text == "virtual":
        return VirtualTarget()
    if text.startswith("qemu:"):
        image = text.removeprefix("qemu:")
        if not image:
            raise BadTarget("qemu target needs an image: --target qemu:out/tui-0.1.0.img.zst")
        return QemuTarget(Path(image))
    if text.startswith("ssh://"):
        return _parse_ssh(text)
    raise BadTarget(
        f"target {text!r} is not supported: use 'virtual', 'ssh://user@host[:port]' or 'qemu:IMAGE'"
    )


def _parse_ssh(text: str) -> SshAddress:
    parts = urlsplit(text)
    try:
        port = parts.port or SSH_PORT
    except ValueError:
        raise BadTarget(f"{text!r}: the port is not a number from 1 to 65535") from None
    if not parts.username or not parts.hostname:
        raise BadTarget(f"{text!r}: expected ssh://user@host[:port], e.g. ssh://tether@board.lan")
    if parts.password is not None:
        raise BadTarget(f"{text!r}: hil logs in with a key only; leave the password out")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BadTarget(f"{text!r}: expected nothing after host[:port]")
    return SshAddress(parts.username, parts.hostname, port)


@dataclass(frozen=True)
class RelaySpec:
    """``--relay LISTEN_HOST:PORT=HOME_HOST:PORT``: the cuttable link between a board and home."""

    listen_host: str
    listen_port: int
    target_host: str
    target_port: int


def parse_relay(text: str) -> RelaySpec:
    """The relay ``text`` describes; BadTarget with the expected form if it is not one."""
    form = "expected LISTEN_HOST:PORT=HOME_HOST:PORT, e.g. 0.0.0.0:2222=127.0.0.1:2223"
    listen, sep, target = text.partition("=")
    if not sep:
        raise BadTarget(f"--relay {text!r}: {form}")
    ends = []
    for end in (listen, target):
        host, colon, port = end.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadTarget(f"--relay {text!r}: {form}")
        ends.append((host, int(port)))
    return RelaySpec(ends[0][0], ends[0][1], ends[1][0], ends[1][1])
