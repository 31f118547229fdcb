"""Which bridge half and key a board carries, and where that half says home is.

The home address lives in the edge half (``connect.host``/``connect.port``),
written by ``bridge pair --home HOST:PORT`` or by a running home's own pairing.
``firmware build --home HOST[:PORT]`` points the copy the board carries
elsewhere without touching the source half: a half paired on the desktop names
``127.0.0.1``, which on an emulated board is the board itself, while qemu's user
network reaches the desktop's loopback at ``10.0.2.2``. The ``qemu`` profile
makes that rewrite by itself for a loopback host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from bridge.errors import PairError
from bridge.pair import PairResult, pair, parse_home
from firmware.errors import BuildError
from firmware.profiles import Profile
from shared.errors import SchemaError
from shared.schema import BridgeHalf
from shared.schema.bridge_half import parse_bridge_half
from shared.yaml_source import parse_yaml

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
QEMU_HOST_ALIAS = "10.0.2.2"  # qemu user networking: the machine running qemu
QEMU_DEFAULT_HOME = f"{QEMU_HOST_ALIAS}:2222"


@dataclass(frozen=True)
class HomeAddress:
    """Where the board connects to home; ``port`` None keeps the half's own port."""

    host: str
    port: int | None = None

    @classmethod
    def parse(cls, value: str) -> HomeAddress:
        """``HOST[:PORT]`` (``[::1]:2222`` for IPv6); PairError says what is wrong."""
        host, port = parse_home(value)
        given = "]:" in value if value.startswith("[") else value.count(":") == 1
        return cls(host, port if given else None)

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def board_home(profile: Profile, half: BridgeHalf, requested: HomeAddress | None) -> HomeAddress:
    """The home address the board's copy of ``half`` should name."""
    if requested is not None:
        return requested
    if profile.name == "qemu" and half.endpoint.host in LOOPBACK_HOSTS:
        return HomeAddress(QEMU_HOST_ALIAS)
    return HomeAddress(half.endpoint.host)


def retarget_half(text: str, file: str, home: HomeAddress) -> str:
    """The edge half ``text`` with ``connect`` pointing at ``home`` (unchanged if it already does).

    A rewritten half is re-read with the half loader, so what the board carries is valid.
    """
    doc = yaml.safe_load(text)
    connect = doc.get("connect") if isinstance(doc, dict) else None
    if not isinstance(connect, dict):
        raise BuildError("inputs", f"{file}: an edge half needs a 'connect' mapping")
    port = home.port if home.port is not None else connect.get("port")
    if connect.get("host") == home.host and connect.get("port") == port:
        return text
    connect["host"] = home.host
    if port is not None:
        connect["port"] = port
    rewritten = (
        f"# {Path(file).name}, its home set to {home} by `firmware build`.\n"
        + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)
    )
    try:
        parse_bridge_half(parse_yaml(rewritten, file), file)
    except SchemaError as exc:
        raise BuildError("inputs", f"{file} with home {home}: {exc}") from exc
    return rewritten


def pair_board(device: str, home: str, out: Path) -> PairResult:
    """``bridge pair --device DEVICE --home HOME --out OUT`` for a build that found no pairing."""
    try:
        return pair(device, home, out)
    except PairError as exc:
        raise BuildError("inputs", f"pairing {device!r}: {exc}") from exc
