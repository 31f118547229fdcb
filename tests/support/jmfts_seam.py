"""The one seam to the JMFTS server, which is built on another branch (home/jmfts).

Tests marked ``needs_jmfts`` take the :func:`jmfts` fixture. It skips, with the
reason, only when :mod:`home.jmfts` is not importable. Once it is, it expects
``home.jmfts.testing.running_jmfts(data_dir)``: an async context manager that
starts a real server on loopback and yields an object with ``url`` and
``async principal(name, grants) -> token`` (a new principal granted the listed
subtrees, e.g. ``["journal/edge_asr", "workspace/edge_asr"]``, and its bearer
token). If that hook is missing the tests fail and say so: connect it at merge.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest


class JmftsUnderTest(Protocol):
    """What the tests need of a running JMFTS."""

    url: str

    async def principal(self, name: str, grants: list[str]) -> str:
        """Create a principal with grants on these subtrees; return its token."""
        ...


def _jmfts_importable() -> bool:
    try:
        return importlib.util.find_spec("home.jmfts") is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture
async def jmfts(tmp_path: Path) -> AsyncIterator[Any]:
    """A running JMFTS server (see the module docstring for the seam)."""
    if not _jmfts_importable():
        pytest.skip("needs the JMFTS server: home.jmfts is not importable on this branch")
    testing = importlib.import_module("home.jmfts.testing")
    running = getattr(testing, "running_jmfts", None)
    if running is None:
        pytest.fail("home.jmfts.testing.running_jmfts(data_dir) is missing: connect the seam")
    async with running(tmp_path / "jmfts") as server:
        yield server
