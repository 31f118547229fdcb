"""``HttpProbe``: the one HTTP client a component's health checks (and warm-up) share.

Building an ``httpx.AsyncClient`` loads the CA bundle, about 20 ms of CPU. Done
on every check (each second, for each HTTP component) it stalled ``home up``'s
event loop, and with it the router, often enough to set routing's p99
(docs/architecture.md "Home"). So the client is built once, on a worker thread,
and kept until the component stops.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx


class HttpProbe:
    """A lazily built, reused ``httpx.AsyncClient`` for GET checks; ``aclose()`` ends it."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None
        self._building: asyncio.Lock | None = None

    async def get(self, url: str) -> httpx.Response:
        """``GET url``; raises ``httpx.HTTPError`` as httpx does."""
        client = await self._ready()
        return await client.get(url)

    async def post_json(self, url: str, body: dict[str, Any], timeout_s: float) -> httpx.Response:
        """``POST url`` with a JSON body; raises ``httpx.HTTPError`` as httpx does."""
        client = await self._ready()
        return await client.post(url, json=body, timeout=timeout_s)

    async def _ready(self) -> httpx.AsyncClient:
        if self._client is None:
            if self._building is None:
                self._building = asyncio.Lock()
            async with self._building:
                if self._client is None:
                    self._client = await asyncio.to_thread(
                        httpx.AsyncClient, timeout=self._timeout_s
                    )
        return self._client

    async def close(self) -> None:
        """Close the client, if one was built; the probe can be used again after."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
