"""Where the board's half says home is: --home, the qemu loopback rewrite, pairing a new board."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.errors import PairError
from firmware.errors import BuildError
from firmware.home_address import (
    QEMU_HOST_ALIAS,
    HomeAddress,
    board_home,
    pair_board,
    retarget_half,
)
from firmware.profiles import get_profile
from shared.schema import load_bridge_half
from shared.schema.bridge_half import parse_bridge_half
from shared.yaml_source import parse_yaml


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10.0.2.2", HomeAddress("10.0.2.2")),
        ("10.0.2.2:40022", HomeAddress("10.0.2.2", 40022)),
        ("home.lan", HomeAddress("home.lan")),
        ("[fd00::1]:2200", HomeAddress("fd00::1", 2200)),
    ],
)
def test_home_addresses_keep_the_halfs_port_unless_given(value: str, expected: HomeAddress) -> None:
    assert HomeAddress.parse(value) == expected


def test_a_bad_home_address_is_a_pair_error() -> None:
    with pytest.raises(PairError, match=r"port must be 1\.\.65535"):
        HomeAddress.parse("home:99999")


@pytest.fixture
def paired(tmp_path: Path) -> Path:
    return pair_board("tui", "127.0.0.1:40022", tmp_path / "bridge").edge_half


def test_the_qemu_profile_turns_a_loopback_home_into_the_host_alias(paired: Path) -> None:
    half = load_bridge_half(paired)
    assert board_home(get_profile("qemu"), half, None) == HomeAddress(QEMU_HOST_ALIAS)
    assert board_home(get_profile("rpi"), half, None) == HomeAddress("127.0.0.1")
    asked = HomeAddress("192.0.2.10", 2222)
    assert board_home(get_profile("qemu"), half, asked) == asked


def test_retargeting_rewrites_only_the_connect_address(paired: Path) -> None:
    text = paired.read_text()
    moved = retarget_half(text, str(paired), HomeAddress("10.0.2.2"))
    before, after = load_bridge_half(paired), parse_bridge_half(parse_yaml(moved, "m"), "m")
    assert (after.endpoint.host, after.endpoint.port) == ("10.0.2.2", 40022)
    assert after.endpoint.host_key == before.endpoint.host_key
    assert after.digest() == before.digest()
    assert moved.startswith("# tui.edge.yaml, its home set to 10.0.2.2 by `firmware build`.")
    again = retarget_half(text, str(paired), HomeAddress("home.lan", 2200))
    assert "host: home.lan\n" in again and "port: 2200\n" in again
    # Already pointing there: the half travels byte for byte.
    assert retarget_half(text, str(paired), HomeAddress("127.0.0.1", 40022)) == text


def test_a_half_without_connect_cannot_be_retargeted(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="needs a 'connect' mapping"):
        retarget_half("bridge: tui\nside: edge\n", "x.yaml", HomeAddress("10.0.2.2"))


def test_pairing_twice_is_refused_with_the_files_named(tmp_path: Path) -> None:
    pair_board("tui", "10.0.2.2:2222", tmp_path)
    with pytest.raises(BuildError, match=r"tui\.edge\.yaml.*already exist"):
        pair_board("tui", "10.0.2.2:2222", tmp_path)
