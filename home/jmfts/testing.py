"""A running JMFTS for tests of other packages: real server, loopback, throwaway data dir.

``async with running_jmfts(dir) as jm:`` gives ``jm.url`` and
``await jm.principal(name, grants)``, a principal granted write on each listed
subtree (created if absent) with a fresh bearer token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from home.jmfts.client import MemoryClient
from home.jmfts.component import provision_principal
from home.jmfts.config import JmftsConfig
from home.jmfts.server import JmftsServer


class RunningJmfts:
    """A started server and its admin token file."""

    def __init__(self, server: JmftsServer) -> None:
        self.server = server
        self.url = server.url

    def admin(self) -> MemoryClient:
        """A client acting as the owner."""
        token_file = self.server.admin_token_file
        if token_file is None:
            raise RuntimeError("the JMFTS server wrote no admin token")
        return MemoryClient.from_token_file(self.url, token_file)

    async def principal(self, name: str, grants: list[str]) -> str:
        """Create ``name`` with write on each subtree of ``grants``; return its token."""

        def make() -> str:
            with self.admin() as admin:
                return provision_principal(admin, name, [(g, "write") for g in grants], None)

        return await asyncio.to_thread(make)


@asynccontextmanager
async def running_jmfts(data_dir: Path) -> AsyncIterator[RunningJmfts]:
    """Serve a fresh store under ``data_dir`` on a free loopback port."""
    server = JmftsServer(JmftsConfig(data_dir=data_dir, port=0))
    await server.start()
    try:
        yield RunningJmfts(server)
    finally:
        await server.stop()
