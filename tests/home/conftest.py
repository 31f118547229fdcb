"""Fixtures for every home test: the shipped node catalog, the edge's side of a turn, a real
JMFTS, and the scripted model server (the one test double: it stands in for the language model).

``nats_url`` (the session's real nats-server) comes from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from home.jmfts.testing import RunningJmfts, running_jmfts
from shared.schema.catalog import NodeCatalog, load_node_catalog
from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import ScriptedModel


@pytest.fixture(scope="session")
def catalog() -> NodeCatalog:
    """The shipped node catalog."""
    return load_node_catalog(REPO_ROOT / "schemas" / "nodes.yaml")


@pytest.fixture
async def edge(nats_url: str) -> AsyncIterator[EdgeSide]:
    """The edge's side of a turn for agent ``edge_asr`` on device ``tui``."""
    nc = await nats.connect(nats_url)
    side = EdgeSide(nc=nc, agent="edge_asr")
    await nc.subscribe("events.>", cb=side.on_event)
    await nc.flush()
    try:
        yield side
    finally:
        await nc.drain()


@pytest.fixture
async def jmfts(tmp_path: Path) -> AsyncIterator[RunningJmfts]:
    """A real JMFTS server on a free loopback port, stopped when the test ends."""
    async with running_jmfts(tmp_path / "jmfts") as server:
        yield server


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModel]:
    """The scripted OpenAI-compatible model server on a free loopback port."""
    async with ScriptedModel() as scripted:
        yield scripted
