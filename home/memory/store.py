"""The reflex's JMFTS client: resolve a root, vector-search it, deposit and supersede.

Everything goes through ``/search/vector`` (a real cosine score, which a gate can
trust) and ``/documents``, with the agent's own bearer token: what the agent was not
granted answers 404, so it is absent here too. Foreign exceptions stop at this
boundary as :class:`MemoryStoreError`.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import httpx

from home.memory.errors import MemoryStoreError
from home.memory.provenance import Provenance

DEFAULT_TIMEOUT_S = 10.0
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


@dataclass(frozen=True)
class StoredMemory:
    """One document as the reflex reads it: a search hit or a written record."""

    id: int
    content: str
    written_at: datetime
    parent_id: int | None = None
    score: float = 0.0
    age: str = ""
    path: str = ""

    @classmethod
    def from_document(
        cls, doc: Any, *, score: float = 0.0, age: str = "", path: str = ""
    ) -> StoredMemory:
        """Parse a JMFTS ``DocumentResponse``; a malformed one is a MemoryStoreError."""
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), int):
            raise MemoryStoreError("GET", "<document>", 0, f"not a document: {doc!r:.200}")
        stamp = doc.get("event_time") or doc.get("created_at")
        written = datetime.fromisoformat(stamp) if isinstance(stamp, str) else datetime.now(UTC)
        if written.tzinfo is None:
            written = written.replace(tzinfo=UTC)
        content = doc.get("content")
        return cls(
            id=doc["id"],
            content=content if isinstance(content, str) else (doc.get("title") or ""),
            written_at=written,
            parent_id=doc.get("parent_id"),
            score=score,
            age=age,
            path=path,
        )


class MemoryStore:
    """JMFTS as one principal. ``async with MemoryStore(url, token=...)``."""

    def __init__(self, base_url: str, *, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            # A request's headers and body go out at once, not behind a delayed ACK.
            transport=httpx.AsyncHTTPTransport(socket_options=NODELAY),
        )
        self._resolved: dict[str, int] = {}

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise MemoryStoreError(method, path, 0, str(exc) or repr(exc)) from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                detail = body.get("detail", body) if isinstance(body, dict) else body
            except ValueError:
                detail = response.text
            raise MemoryStoreError(method, path, response.status_code, detail)
        try:
            return response.json() if response.content else None
        except ValueError as exc:
            raise MemoryStoreError(method, path, response.status_code, "not JSON") from exc

    # -- roots -------------------------------------------------------------------------

    async def resolve(self, path: str) -> int:
        """The id of the document at a titled path (``workspace/x``) or ``#id``.

        A principal sees its grant roots as its roots, so a path may begin above what
        it can see: the longest tail of the path that starts at a visible root wins.
        A root is matched by its titled path (an agent's ``journal/x`` and
        ``workspace/x`` are both roots titled ``x``). Absent or not granted is a 404
        :class:`MemoryStoreError`.
        """
        cached = self._resolved.get(path)
        if cached is not None:
            return cached
        text = path.strip().lstrip("#")
        if text.isdigit():
            doc = await self._request("GET", f"/documents/{int(text)}")
            self._resolved[path] = int(doc["id"])
            return self._resolved[path]
        parts = [p for p in text.split("/") if p]
        if not parts:
            raise MemoryStoreError("GET", path, 400, "the path names no document")
        roots = await self._request("GET", "/documents/roots")
        for start in range(len(parts)):
            for root in roots:
                if root.get("titled_path") != "/".join(parts[: start + 1]):
                    continue
                found = await self._walk(int(root["id"]), parts[start + 1 :])
                if found is not None:
                    self._resolved[path] = found
                    return found
        raise MemoryStoreError("GET", path, 404, "no such document visible to this principal")

    async def _walk(self, node: int, titles: list[str]) -> int | None:
        for title in titles:
            found = await self._request(
                "GET", f"/documents/{node}/children", params={"title": title, "limit": 100}
            )
            if not found:
                return None
            node = max(int(d["id"]) for d in found)
        return node

    # -- search ------------------------------------------------------------------------

    async def vector_search(self, query: str, root_id: int, limit: int) -> list[StoredMemory]:
        """Top ``limit`` documents under ``root_id`` by cosine score, ungated (threshold 0)."""
        body = {"query": query, "limit": limit, "roots": [root_id], "threshold": 0.0}
        answer = await self._request("POST", "/search/vector", json=body)
        if not isinstance(answer, dict) or answer.get("score_kind") != "cosine":
            raise MemoryStoreError(
                "POST", "/search/vector", 200, f"not cosine scores: {answer!r:.200}"
            )
        hits = []
        for item in answer.get("results", []):
            if item.get("id") == root_id:
                continue  # the root itself is a container, not a memory
            hits.append(
                StoredMemory.from_document(
                    item.get("document"),
                    score=float(item.get("score", 0.0)),
                    age=str(item.get("age", "")),
                    path=str(item.get("path", "")),
                )
            )
        return hits

    # -- writes ------------------------------------------------------------------------

    async def deposit(
        self,
        parent_id: int,
        text: str,
        *,
        supersedes: int | None = None,
        origin: Provenance | None = None,
    ) -> StoredMemory:
        """Write one memory under ``parent_id`` (findable when this returns).

        With ``supersedes`` in a workspace (append-only) a new record replaces the old;
        elsewhere the old document is updated in place. ``origin`` is written into the
        record (its audit thread).
        """
        body: dict[str, Any] = {"title": None, "content": text, "parent_id": parent_id}
        if origin is not None:
            body["structured_content"] = origin.structured_content()
        if supersedes is None:
            return StoredMemory.from_document(await self._request("POST", "/documents", json=body))
        try:
            doc = await self._request("POST", "/documents", json={**body, "supersedes": supersedes})
        except MemoryStoreError as exc:
            if exc.status != 400:
                raise
            # Outside a workspace there is no supersession: update the memory in place.
            patch = {k: v for k, v in body.items() if k in ("content", "structured_content")}
            doc = await self._request("PATCH", f"/documents/{supersedes}", json=patch)
        return StoredMemory.from_document(doc)
