"""A small typed async HTTP client for the JMFTS endpoints the effectors use.

The endpoints and shapes are those of the real PyPI clients (``jmfts-client``'s
``RemoteJmftsClient``, ``ffwf-tau-jmfts``'s ``tau_jmfts.client.JmftsClient``):
``GET /`` (health), ``GET /documents/roots``, ``GET /documents/{id}``,
``GET /documents/{id}/children``, ``POST /documents``. Every request carries the
calling agent's bearer token; a document the principal was not granted
answers 404 like one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from home.effectors.errors import JmftsError

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Document:
    """The fields of a JMFTS ``DocumentResponse`` the effectors read."""

    id: int
    parent_id: int | None
    title: str | None
    content: str | None
    usetype: str | None
    titled_path: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> Document:
        """Parse one document object; a malformed one is a JmftsError, not a KeyError."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise JmftsError("GET", "<document>", 0, f"not a document: {data!r:.200}")
        return cls(
            id=data["id"],
            parent_id=data.get("parent_id"),
            title=data.get("title"),
            content=data.get("content"),
            usetype=data.get("usetype"),
            titled_path=data.get("titled_path"),
        )


class JmftsClient:
    """JMFTS over HTTP as one principal. ``async with JmftsClient(url, token=...)``."""

    def __init__(self, base_url: str, *, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    async def __aenter__(self) -> JmftsClient:
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
            raise JmftsError(method, f"{self.base_url}{path}", 0, str(exc) or repr(exc)) from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                detail = body.get("detail", body) if isinstance(body, dict) else body
            except ValueError:
                detail = response.text
            raise JmftsError(method, path, response.status_code, detail)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise JmftsError(method, path, response.status_code, "answer is not JSON") from exc

    async def health(self) -> dict[str, Any]:
        """``GET /``: the server's health document."""
        result = await self._request("GET", "/")
        return result if isinstance(result, dict) else {}

    async def roots(self) -> list[Document]:
        """``GET /documents/roots``: every root this principal can see."""
        return [Document.from_json(d) for d in await self._request("GET", "/documents/roots")]

    async def get(self, doc_id: int) -> Document:
        """``GET /documents/{id}``."""
        return Document.from_json(await self._request("GET", f"/documents/{doc_id}"))

    async def children(self, doc_id: int, *, title: str | None = None) -> list[Document]:
        """``GET /documents/{id}/children``: immediate children, optionally by exact title."""
        params: dict[str, Any] = {"depth": 1, "limit": 100}
        if title is not None:
            params["title"] = title
        found = await self._request("GET", f"/documents/{doc_id}/children", params=params)
        return [Document.from_json(d) for d in found]

    async def create(
        self,
        *,
        title: str | None,
        content: str | None,
        parent_id: int | None,
        usetype: str | None = None,
        structured_content: dict[str, Any] | None = None,
        auto_embed: bool = True,
    ) -> Document:
        """``POST /documents``. Embedded at write, so the note is findable at ack."""
        body: dict[str, Any] = {
            "title": title,
            "content": content,
            "parent_id": parent_id,
            "usetype": usetype,
            "structured_content": structured_content,
            "auto_embed": auto_embed,
        }
        return Document.from_json(await self._request("POST", "/documents", json=body))

    async def ensure_path(self, titles: list[str]) -> Document:
        """The document at ``titles`` (a root, then children by title), created if missing.

        A principal granted only a subtree sees that subtree's top as one of its
        roots, so the deepest root found on the path is where the walk starts
        (``journal/edge_asr`` is the root ``edge_asr`` to an agent granted just that).
        A root is matched by its titled path, not its title alone: the same agent's
        ``workspace/edge_asr`` is a root titled ``edge_asr`` too.
        """
        if not titles:
            raise ValueError("ensure_path needs at least one title")
        roots = await self.roots()
        node: Document | None = None
        rest: list[str] = []
        for depth in range(len(titles) - 1, -1, -1):
            wanted = "/".join(titles[: depth + 1])
            node = next((d for d in roots if d.titled_path == wanted), None)
            if node is not None:
                rest = titles[depth + 1 :]
                break
        if node is None:
            node = await self.create(title=titles[0], content=None, parent_id=None)
            rest = titles[1:]
        for title in rest:
            found = await self.children(node.id, title=title)
            node = found[0] if found else await self.create(
                title=title, content=None, parent_id=node.id
            )  # fmt: skip
        return node
