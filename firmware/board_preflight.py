"""The board's preflight stand-in for `edge run`, started by ``tether-edge.service``.

It is not the edge. Until `edge run` is on main, the image's service runs this
(see ``firmware/board/edge-service.yaml``): it checks, on the board itself,
that our wheel imports in the board's venv, that ``/etc/tether/edge.yaml``
parses and names a valid device, that the bridge half it names loads as this
device's edge half, and that the board key is private (0600). Only then does
it send READY=1 on $NOTIFY_SOCKET; after that it feeds the systemd watchdog
until it is stopped. Any failed check exits non-zero without READY=1.

Run: ``python -m firmware.board_preflight --config /etc/tether/edge.yaml``
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import stat
import sys
import threading
from pathlib import Path

from shared.errors import ContractError
from shared.schema import load_bridge_half
from shared.subjects import check_name
from shared.yaml_source import LocatedDict, load_yaml


class PreflightError(Exception):
    """One check failed; the message says which and why."""


def notify(message: str) -> bool:
    """Send ``message`` to systemd's $NOTIFY_SOCKET; False when there is none."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(message.encode())
    return True


def check(config_path: Path) -> str:
    """Run every check; return a one-line status for systemd."""
    try:
        doc = load_yaml(config_path)
    except (ContractError, OSError) as exc:
        raise PreflightError(f"{config_path}: {exc}") from None
    if not isinstance(doc, LocatedDict):
        raise PreflightError(f"{config_path}: expected a mapping")
    device = doc.get("device")
    try:
        check_name(str(device), "device")
    except ContractError as exc:
        raise PreflightError(f"{config_path}: device: {exc}") from None
    bridge = doc.get("bridge") or {}
    half_path = bridge.get("half") if isinstance(bridge, dict) else None
    if not half_path:
        return f"device {device}: config ok, no bridge half (local only)"
    try:
        half = load_bridge_half(half_path)
    except (ContractError, OSError) as exc:
        raise PreflightError(f"bridge half {half_path}: {exc}") from None
    if half.side != "edge" or half.device != device:
        raise PreflightError(
            f"{half_path}: is the {half.side} half of {half.device!r}, "
            f"expected the edge half of {device!r}"
        )
    secrets = Path(str(bridge.get("secrets") or "/etc/tether/keys"))
    key = secrets / f"{device}.edge.key"
    key_state = "no board key"
    if key.exists():
        mode = stat.S_IMODE(key.stat().st_mode)
        if mode & 0o077:
            raise PreflightError(f"{key} has mode {mode:o}; a private key must be 0600")
        key_state = "board key 0600"
    return f"device {device}: config ok, bridge half {half.digest()[:12]}, {key_state}"


def main(argv: list[str] | None = None) -> int:
    """Check, report READY=1, feed the watchdog until SIGTERM."""
    parser = argparse.ArgumentParser(prog="board_preflight", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("/etc/tether/edge.yaml"))
    args = parser.parse_args(argv)
    try:
        status = check(args.config)
    except PreflightError as exc:
        print(f"tether preflight failed: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"tether preflight: {status}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    notify(f"READY=1\nSTATUS=preflight stand-in: {status}")
    interval = int(os.environ.get("WATCHDOG_USEC", "0")) / 2e6 or 30.0
    while not stop.wait(interval):
        notify("WATCHDOG=1")
    notify("STOPPING=1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
