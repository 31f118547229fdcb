"""`bridge pair`: make a board's key pair, the home host key if absent, and both halves.

The halves carry public keys only; private keys go to a secrets directory with
mode 0600, and never anywhere under a ``schemas/`` directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from bridge.errors import PairError
from shared.errors import SubjectError
from shared.files import write_atomic
from shared.schema.bridge_half import DEFAULT_PORT
from shared.subjects import (
    SPEECH_COMPLETED_PATTERN,
    check_name,
    device_rail_pattern,
    sensation_turn_subject,
)

KEY_ALGORITHM = "ssh-ed25519"
HOST_KEY_NAME = "home_host_key"
DEFAULT_USER = "tether"


@dataclass(frozen=True)
class PairResult:
    """What `bridge pair` wrote."""

    edge_half: Path
    home_half: Path
    client_key: Path
    host_key: Path
    host_key_created: bool
    client_fingerprint: str
    host_fingerprint: str


# A device name becomes file names (DEVICE.edge.key): refused before the filesystem does.
MAX_DEVICE_CHARS = 64


def device_name_problem(device: str) -> str | None:
    """Why ``device`` cannot name a pairing (a subject token, its files' names), or None."""
    try:
        check_name(device, "device")
    except SubjectError as exc:
        return str(exc)
    if len(device) > MAX_DEVICE_CHARS:
        return f"device names are at most {MAX_DEVICE_CHARS} characters"
    return None


@dataclass(frozen=True)
class PairingFiles:
    """Where `bridge pair` puts one device's files: ``OUT/D.edge.yaml``, ``OUT/D.home.yaml``,
    and the board's private key in ``SECRETS/D.edge.key`` (``SECRETS`` defaults to
    ``OUT/secrets``)."""

    edge_half: Path
    home_half: Path
    client_key: Path

    @classmethod
    def of(cls, out: Path, device: str, secrets: Path | None = None) -> PairingFiles:
        """The files of ``device`` paired into ``out``."""
        secrets = secrets or out / "secrets"
        return cls(
            out / f"{device}.edge.yaml", out / f"{device}.home.yaml", secrets / f"{device}.edge.key"
        )


def parse_home(value: str) -> tuple[str, int]:
    """``HOST[:PORT]`` (``[::1]:2222`` for IPv6) into host and port."""
    host, port_text = value, ""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise PairError(f"--home {value!r}: unclosed '[' in an IPv6 address")
        host, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            raise PairError(f"--home {value!r}: expected ':PORT' after ']'")
        port_text = rest[1:]
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    if not host:
        raise PairError(f"--home {value!r}: the host is empty")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise PairError(f"--home {value!r}: port must be 1..65535, got {port_text!r}")
    return host, int(port_text)


def _under_schemas(path: Path) -> bool:
    return "schemas" in path.resolve().parts


def _write_private(path: Path, key: asyncssh.SSHKey) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    write_atomic(path, key.export_private_key("openssh"), private=True)
    write_atomic(path.with_name(path.name + ".pub"), key.export_public_key("openssh"))


def _subjects(device: str) -> tuple[list[str], list[str]]:
    edge_exports = [sensation_turn_subject(device), SPEECH_COMPLETED_PATTERN]
    # Not the memory reports (recall, memorize): no memory crosses (`bridge check` B023).
    edge_imports = [device_rail_pattern(rail, device) for rail in ("speak", "reply")]
    return edge_exports, edge_imports


def _half_text(
    *, device: str, side: str, host: str, port: int, host_key: str, client_key: str
) -> str:
    exports, imports = _subjects(device)
    if side == "home":
        exports, imports = imports, exports
    endpoint, key_field = (
        ("connect", "client_key") if side == "edge" else ("listen", "authorized_key")
    )
    lines = [
        f"# {side.capitalize()} half of the {device!r} bridge, written by `bridge pair`.",
        "# Public keys only: the private keys live in the secrets directory (mode 0600).",
        "# JSON Schema: schemas/json/bridge-half.schema.json",
        f"bridge: {device}",
        f"side: {side}",
        f"device: {device}",
        f"{endpoint}:",
        f"  host: {host}",
        f"  port: {port}",
        f"  user: {DEFAULT_USER}",
        f"  host_key: {host_key}",
        f"  {key_field}: {client_key}",
        "exports:",
        *(f"  - {s}" for s in exports),
        "imports:",
        *(f"  - {s}" for s in imports),
        "limits:",
        "  max_event_bytes: 65536",
        "  max_string_bytes: 8192",
        "  outbox_events: 10000",
    ]
    return "\n".join(lines) + "\n"


def pair(
    device: str,
    home: str,
    out: Path,
    *,
    secrets: Path | None = None,
    listen_host: str = "127.0.0.1",
    force: bool = False,
) -> PairResult:
    """Generate keys and write ``DEVICE.edge.yaml`` and ``DEVICE.home.yaml`` into ``out``."""
    problem = device_name_problem(device)
    if problem is not None:
        raise PairError(problem)
    host, port = parse_home(home)
    secrets = secrets or out / "secrets"
    if _under_schemas(secrets):
        raise PairError(
            f"refusing to write private keys under schemas/ ({secrets}); "
            "pass --secrets DIR outside the repository's schemas/"
        )
    files = PairingFiles.of(out, device, secrets)
    edge_path, home_path, client_path = files.edge_half, files.home_half, files.client_key
    host_path = secrets / HOST_KEY_NAME
    existing = [p for p in (edge_path, home_path, client_path) if p.exists()]
    if existing and not force:
        raise PairError(
            f"{', '.join(str(p) for p in existing)} already exist(s); pass --force to pair "
            f"{device!r} again (the board then needs its new key)"
        )
    host_created = not host_path.exists()
    try:
        if host_created:
            host_key = asyncssh.generate_private_key(KEY_ALGORITHM, comment="tether-home")
            _write_private(host_path, host_key)
        else:
            host_key = asyncssh.read_private_key(str(host_path))
        client_key = asyncssh.generate_private_key(KEY_ALGORITHM, comment=f"tether-{device}")
        _write_private(client_path, client_key)
        host_pub = _openssh_line(host_key, "tether-home")
        client_pub = _openssh_line(client_key, f"tether-{device}")
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(
            edge_path,
            _half_text(
                device=device,
                side="edge",
                host=host,
                port=port,
                host_key=host_pub,
                client_key=client_pub,
            ),
        )
        write_atomic(
            home_path,
            _half_text(
                device=device,
                side="home",
                host=listen_host,
                port=port,
                host_key=host_pub,
                client_key=client_pub,
            ),
        )
    except (OSError, asyncssh.KeyImportError) as exc:
        raise PairError(f"cannot write the pairing: {exc}") from exc
    return PairResult(
        edge_half=edge_path,
        home_half=home_path,
        client_key=client_path,
        host_key=host_path,
        host_key_created=host_created,
        client_fingerprint=client_key.get_fingerprint("sha256"),
        host_fingerprint=host_key.get_fingerprint("sha256"),
    )


def _openssh_line(key: asyncssh.SSHKey, comment: str) -> str:
    kind, body = key.export_public_key("openssh").decode("ascii").split()[:2]
    return f"{kind} {body} {comment}"
