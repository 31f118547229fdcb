"""Fixtures for the bridge tests: a pairing, and one nats-server per side."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.servers import Paired, make_pair, nats_server


@pytest.fixture
def paired(tmp_path: Path) -> Paired:
    """A fresh `bridge pair --device board` in a temp dir."""
    return make_pair(tmp_path / "pair")


@pytest.fixture
def home_nats() -> Iterator[str]:
    """Home's nats-server."""
    with nats_server() as url:
        yield url


@pytest.fixture
def edge_nats() -> Iterator[str]:
    """The board's nats-server."""
    with nats_server() as url:
        yield url
