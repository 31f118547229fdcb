"""A real JMFTS server for tests elsewhere in the tree (the ``jmfts`` fixture of ``tests/home``).

``running_jmfts(data_dir)`` starts :class:`~home.jmfts.server.JmftsServer` on a free
loopback port in the caller's event loop and yields a :class:`RunningJmfts`: its URL,
the admin token, and ways to provision principals and documents over the HTTP API,
exactly as an operator would. Stopped (index saved, database closed) on exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from home.jmfts.client import PATIENT_TIMEOUT_S, JmftsClient
from home.jmfts.config import JmftsConfig
from home.jmfts.errors import JmftsError
from home.jmfts.server import JmftsServer


class RunningJmfts:
    """A started server and an admin client to provision it."""

    def __init__(self, server: JmftsServer, admin: JmftsClient) -> None:
        self.server = server
        self.url = server.url
        self._admin = admin

    @property
    def admin_token(self) -> str:
        """The owner principal's bearer token."""
        return _token(self.server)

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return await self._admin.request(method, path, **kwargs)

    async def ensure_path(self, path: str) -> int:
        """The id of the document at a titled path, containers created as needed."""
        return (await self._admin.ensure(path)).id

    async def write(
        self,
        path: str,
        text: str,
        *,
        event_time: datetime | None = None,
        usetype: str | None = None,
    ) -> int:
        """Write one document under the container at ``path`` as the owner; its id."""
        parent = await self.ensure_path(path)
        doc = await self._admin.create(
            title=None,
            content=text,
            parent_id=parent,
            event_time=event_time.isoformat() if event_time is not None else None,
            usetype=usetype,
        )
        return doc.id

    async def document(self, doc_id: int) -> dict[str, Any]:
        """Document ``doc_id`` as the owner reads it (``GET /documents/{id}``)."""
        found: dict[str, Any] = await self._call("GET", f"/documents/{doc_id}")
        return found

    async def grant(self, name: str, path: str, level: str = "read") -> None:
        """Grant the principal called ``name`` ``level`` on the subtree at ``path``."""
        pid = await self._admin.principal_id(name, create=False)
        await self._admin.grant(path, pid, level)

    async def principal(
        self, name: str, grants: list[str], *, read: list[str] | tuple[str, ...] = ()
    ) -> str:
        """A new principal with write on ``grants`` and read on ``read``; its token."""
        pid = await self._admin.create_principal(name)
        for level, paths in (("write", grants), ("read", read)):
            for path in paths:
                await self._admin.grant(path, pid, level)
        return await self._admin.mint_token(pid, label=name)


@asynccontextmanager
async def running_jmfts(data_dir: Path) -> AsyncIterator[RunningJmfts]:
    """Start a JMFTS server on a free loopback port under ``data_dir``; stop it on exit."""
    async with (
        JmftsServer(JmftsConfig(data_dir=data_dir, port=0)) as server,
        JmftsClient(server.url, token=_token(server), timeout_s=PATIENT_TIMEOUT_S) as admin,
    ):
        yield RunningJmfts(server, admin)


def _token(server: JmftsServer) -> str:
    if server.admin_token_file is None:
        raise JmftsError("the JMFTS server has no admin token file (not started)")
    return server.admin_token_file.read_text().strip()
