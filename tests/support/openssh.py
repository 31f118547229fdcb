"""A real OpenSSH server on a free loopback port: its own host key, one authorized login key.

This machine plays the board: hil's ssh target logs in here as root with the
key (sshd allows keys only) and pins the host key through a known_hosts file.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from firmware.boottest import ssh_banner
from shared.proc import free_port, terminate

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class OpenSsh:
    """A running sshd: where it listens, the login key, the host key as pinned."""

    port: int
    client_key: Path
    host_key_line: str
    known_hosts: Path
    log: Path


def keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair at ``path``; the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True, timeout=30,
    )  # fmt: skip
    return path.with_suffix(".pub").read_text().strip()


def _keys(root: Path) -> tuple[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation folder
    return keygen(root / "host_ed25519", "hil-test-host"), keygen(
        root / "client_ed25519", "hil-test-client"
    )


@contextlib.asynccontextmanager
async def openssh_server(root: Path) -> AsyncIterator[OpenSsh]:
    """Start ``sshd -D`` with a private config under ``root``; stop it after."""
    host_pub, client_pub = await asyncio.to_thread(_keys, root)
    (root / "authorized_keys").write_text(client_pub + "\n")
    port = free_port()
    host_line = " ".join(host_pub.split()[:2])
    known = root / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_line}\n")
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_ed25519'}\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "AllowTcpForwarding yes\nSubsystem sftp internal-sftp\nLogLevel VERBOSE\n"
    )
    log = root / "sshd.log"
    proc = await asyncio.create_subprocess_exec(
        SSHD, "-D", "-e", "-f", str(config), "-E", str(log),
        stdin=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        async with asyncio.timeout(30):
            while await ssh_banner(port, 2.0) is None:
                if proc.returncode is not None:
                    raise RuntimeError(f"sshd exited {proc.returncode}: {log.read_text()}")
                await asyncio.sleep(0.1)
        yield OpenSsh(port, root / "client_ed25519", host_line, known, log)
    finally:
        await terminate(proc, 10)
