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

import httpx

from home.jmfts.config import JmftsConfig
from home.jmfts.errors import JmftsError
from home.jmfts.models import WORKSPACE_USETYPE
from home.jmfts.server import JmftsServer


class RunningJmfts:
    """A started server and an admin HTTP client to provision it."""

    def __init__(self, server: JmftsServer, admin: httpx.AsyncClient) -> None:
        self.server = server
        self.url = server.url
        self._admin = admin

    @property
    def admin_token(self) -> str:
        """The owner principal's bearer token."""
        return _token(self.server)

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._admin.request(method, path, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    async def ensure_path(self, path: str) -> int:
        """The id of the document at a titled path, containers created as needed."""
        parent: int | None = None
        for i, title in enumerate(p for p in path.split("/") if p):
            if parent is None:
                found = [
                    d for d in await self._call("GET", "/documents/roots") if d["title"] == title
                ]
            else:
                found = await self._call(
                    "GET", f"/documents/{parent}/children", params={"title": title}
                )
            if found:
                parent = int(max(d["id"] for d in found))
                continue
            usetype = WORKSPACE_USETYPE if i == 0 and title == "workspace" else None
            doc = await self._call(
                "POST",
                "/documents",
                json={"title": title, "content": None, "parent_id": parent, "usetype": usetype},
            )
            parent = int(doc["id"])
        if parent is None:
            raise ValueError(f"path {path!r} names no document")
        return parent

    async def write(self, path: str, text: str, *, event_time: datetime | None = None) -> int:
        """Write one document under the container at ``path`` as the owner; its id."""
        parent = await self.ensure_path(path)
        body: dict[str, Any] = {"title": None, "content": text, "parent_id": parent}
        if event_time is not None:
            body["event_time"] = event_time.isoformat()
        return int((await self._call("POST", "/documents", json=body))["id"])

    async def grant(self, name: str, path: str, level: str = "read") -> None:
        """Grant the principal called ``name`` ``level`` on the subtree at ``path``."""
        principals = await self._call("GET", "/access/principals")
        pid = next(int(p["id"]) for p in principals if p["name"] == name)
        doc = await self.ensure_path(path)
        await self._call(
            "POST", f"/access/documents/{doc}/grants", json={"principal_id": pid, "level": level}
        )

    async def principal(
        self, name: str, grants: list[str], *, read: list[str] | tuple[str, ...] = ()
    ) -> str:
        """A new principal with write on ``grants`` and read on ``read``; its token."""
        created = await self._call("POST", "/access/principals", json={"name": name})
        pid = int(created["id"])
        for level, paths in (("write", grants), ("read", read)):
            for path in paths:
                doc = await self.ensure_path(path)
                await self._call(
                    "POST",
                    f"/access/documents/{doc}/grants",
                    json={"principal_id": pid, "level": level},
                )
        minted = await self._call("POST", f"/access/principals/{pid}/tokens", json={"label": name})
        return str(minted["token"])


@asynccontextmanager
async def running_jmfts(data_dir: Path) -> AsyncIterator[RunningJmfts]:
    """Start a JMFTS server on a free loopback port under ``data_dir``; stop it on exit."""
    async with (
        JmftsServer(JmftsConfig(data_dir=data_dir, port=0)) as server,
        httpx.AsyncClient(
            base_url=server.url,
            headers={"Authorization": f"Bearer {_token(server)}"},
            timeout=60.0,
        ) as admin,
    ):
        yield RunningJmfts(server, admin)


def _token(server: JmftsServer) -> str:
    if server.admin_token_file is None:
        raise JmftsError("the JMFTS server has no admin token file (not started)")
    return server.admin_token_file.read_text().strip()
