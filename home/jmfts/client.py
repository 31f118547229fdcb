"""The one JMFTS HTTP client: :class:`JmftsClient` (async) and :class:`SyncJmftsClient`.

Every request carries one principal's bearer token; what that principal was not granted
answers 404 like what does not exist. Foreign exceptions stop at :meth:`JmftsClient.request`:
no answer is :class:`~home.jmfts.errors.Unreachable`, an error status the
:mod:`home.jmfts.errors` class for it, an answer that is not JSON
:class:`~home.jmfts.errors.MalformedAnswer`.

On top of the routes it adds titled-path addressing (``workspace/notes/x``). A principal
granted only a subtree sees that subtree's top as one of its roots, matched by its titled
path (an agent's ``journal/x`` and ``workspace/x`` are both roots titled ``x``), so a path
may begin above what the principal can see. Below a root, each title picks the newest
child of that title: in a workspace several records share one.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from home.jmfts.errors import (
    Conflict,
    InvalidInput,
    JmftsError,
    MalformedAnswer,
    NotFound,
    Unreachable,
    refusal,
)
from home.jmfts.models import WORKSPACE_USETYPE
from shared.lifecycle import Service

DEFAULT_TIMEOUT_S = 10.0
#: The CLI and provisioning wait longer: a first write may load the embedder.
PATIENT_TIMEOUT_S = 60.0
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


@dataclass(frozen=True)
class Document:
    """A JMFTS ``DocumentResponse``: the fields callers read, and the answer as sent."""

    id: int
    parent_id: int | None
    title: str | None
    content: str | None
    usetype: str | None
    titled_path: str | None = None
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Any) -> Document:
        """Parse one document object; a malformed one is a MalformedAnswer, not a KeyError."""
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise MalformedAnswer(f"JMFTS answered with something not a document: {data!r:.200}")
        return cls(
            id=data["id"],
            parent_id=data.get("parent_id"),
            title=data.get("title"),
            content=data.get("content"),
            usetype=data.get("usetype"),
            titled_path=data.get("titled_path"),
            data=data,
        )


def split_path(path: str) -> list[str]:
    """``/workspace//notes/x/`` -> ``["workspace", "notes", "x"]``; empty is an error."""
    parts = [p for p in path.strip().split("/") if p]
    if not parts:
        raise InvalidInput(f"path {path!r} names no document")
    return parts


def read_token_file(token_file: Path) -> str:
    """The bearer token stored in ``token_file``."""
    try:
        return token_file.read_text().strip()
    except OSError as exc:
        raise InvalidInput(f"{token_file}: cannot read the token file ({exc})") from exc


class JmftsClient(Service):
    """JMFTS over HTTP as one principal. ``async with JmftsClient(url, token=...)``."""

    def __init__(self, base_url: str, *, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            # A request's headers and body go out at once, not behind a delayed ACK.
            transport=httpx.AsyncHTTPTransport(socket_options=NODELAY),
        )

    @classmethod
    def from_token_file(
        cls, base_url: str, token_file: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> JmftsClient:
        """A client using the token stored in ``token_file``."""
        return cls(base_url, token=read_token_file(token_file), timeout_s=timeout_s)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; its JSON answer, or None when the answer is empty."""
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            detail = str(exc) or repr(exc)
            raise Unreachable(
                f"JMFTS {method} {self.base_url}{path}: unreachable (cannot reach it: {detail})",
                method=method,
                path=path,
                status=0,
                detail=detail,
            ) from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                detail = body.get("detail", body) if isinstance(body, dict) else body
            except ValueError:
                detail = response.text
            raise refusal(method, path, response.status_code, detail)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise MalformedAnswer(
                f"JMFTS {method} {path} -> {response.status_code}: answer is not JSON",
                method=method,
                path=path,
                status=response.status_code,
                detail="answer is not JSON",
            ) from exc

    # -- documents -----------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """``GET /``: the server's health document."""
        result = await self.request("GET", "/")
        return result if isinstance(result, dict) else {}

    async def get(self, doc_id: int) -> Document:
        """``GET /documents/{id}``."""
        return Document.from_json(await self.request("GET", f"/documents/{doc_id}"))

    async def roots(self) -> list[Document]:
        """``GET /documents/roots``: every root this principal can see."""
        return [Document.from_json(d) for d in await self.request("GET", "/documents/roots")]

    async def documents(
        self, *, usetype: str | None = None, title_prefix: str | None = None, limit: int = 100
    ) -> list[Document]:
        """``GET /documents``: one page of readable documents, by usetype and title prefix."""
        params: dict[str, Any] = {"limit": limit}
        if usetype is not None:
            params["usetype"] = usetype
        if title_prefix is not None:
            params["title_prefix"] = title_prefix
        found = await self.request("GET", "/documents", params=params)
        return [Document.from_json(d) for d in found]

    async def children(self, doc_id: int, *, title: str | None = None) -> list[Document]:
        """``GET /documents/{id}/children``: immediate children, optionally by exact title."""
        params: dict[str, Any] = {"depth": 1, "limit": 100}
        if title is not None:
            params["title"] = title
        found = await self.request("GET", f"/documents/{doc_id}/children", params=params)
        return [Document.from_json(d) for d in found]

    async def create(
        self,
        *,
        title: str | None,
        content: str | None,
        parent_id: int | None,
        usetype: str | None = None,
        structured_content: dict[str, Any] | None = None,
        supersedes: int | None = None,
        event_time: str | None = None,
    ) -> Document:
        """``POST /documents``. Embedded at write, so the document is findable when this returns."""
        body: dict[str, Any] = {
            "title": title,
            "content": content,
            "parent_id": parent_id,
            "usetype": usetype,
        }
        extra = {
            "structured_content": structured_content,
            "supersedes": supersedes,
            "event_time": event_time,
        }
        body.update({k: v for k, v in extra.items() if v is not None})
        return Document.from_json(await self.request("POST", "/documents", json=body))

    async def update(self, doc_id: int, changes: dict[str, Any]) -> Document:
        """``PATCH /documents/{id}`` (refused with 409 inside a workspace)."""
        return Document.from_json(await self.request("PATCH", f"/documents/{doc_id}", json=changes))

    async def subtree(self, doc_id: int, max_depth: int | None = None) -> dict[str, Any]:
        """``GET /documents/{id}/subtree``."""
        params = {"max_depth": max_depth} if max_depth is not None else None
        return dict(await self.request("GET", f"/documents/{doc_id}/subtree", params=params))

    async def search(self, query: str, method: str, limit: int, **filters: Any) -> dict[str, Any]:
        """``POST /search/{method}``; filters left None are not sent."""
        body = {
            "query": query,
            "limit": limit,
            **{k: v for k, v in filters.items() if v is not None},
        }
        return dict(await self.request("POST", f"/search/{method}", json=body))

    # -- titled paths --------------------------------------------------------------------

    async def resolve(self, path: str) -> Document:
        """The document at a titled path, or an id given as ``#12`` / ``12``."""
        text = path.strip().lstrip("#")
        if text.isdigit():
            return await self.get(int(text))
        for root, rest in await self._starts(split_path(path)):
            found = await self._descend(root, rest)
            if found is not None:
                return found
        raise refusal("GET", path, 404, "no document at this path visible to this principal")

    async def ensure(self, path: str) -> Document:
        """The document at a titled path, created (with its parents, empty) if absent."""
        parts = split_path(path)
        starts = await self._starts(parts)
        if starts:
            node, rest = starts[0]
        else:
            node = await self.create(
                title=parts[0], content=None, parent_id=None, usetype=_container_usetype(parts[0])
            )
            rest = parts[1:]
        for title in rest:
            found = await self._child(node, title)
            node = found or await self.create(title=title, content=None, parent_id=node.id)
        return node

    async def put(self, path: str, text: str, *, usetype: str | None = None) -> Document:
        """Write ``text`` at ``path``, creating parents; the written document.

        An existing leaf is updated, or, inside a workspace (which refuses edits with
        409), superseded by a new record.
        """
        parts = split_path(path)
        parent = await self.ensure("/".join(parts[:-1])) if len(parts) > 1 else None
        leaf = parts[-1]
        existing = await self._child(parent, leaf)
        parent_id = parent.id if parent is not None else None
        if existing is None:
            return await self.create(title=leaf, content=text, parent_id=parent_id, usetype=usetype)
        changes: dict[str, Any] = {"content": text}
        if usetype is not None:
            changes["usetype"] = usetype
        try:
            return await self.update(existing.id, changes)
        except Conflict:
            return await self.create(
                title=leaf,
                content=text,
                parent_id=parent_id,
                usetype=usetype,
                supersedes=existing.id,
            )

    async def _starts(self, parts: list[str]) -> list[tuple[Document, list[str]]]:
        """The visible roots a path begins at, deepest then newest first, each with the titles
        below it."""
        roots = sorted(await self.roots(), key=lambda d: -d.id)
        return [
            (root, parts[depth + 1 :])
            for depth in reversed(range(len(parts)))
            for root in roots
            if root.titled_path == "/".join(parts[: depth + 1])
        ]

    async def _descend(self, node: Document, titles: list[str]) -> Document | None:
        for title in titles:
            found = await self._child(node, title)
            if found is None:
                return None
            node = found
        return node

    async def _child(self, parent: Document | None, title: str) -> Document | None:
        if parent is None:
            found = [d for d in await self.roots() if d.title == title]
        else:
            found = await self.children(parent.id, title=title)
        return max(found, key=lambda d: d.id) if found else None

    # -- access --------------------------------------------------------------------------

    async def principal_id(self, name: str, *, create: bool) -> int:
        """The id of the principal called ``name`` (created when asked; when another
        writer created it first, as a clustered home's members may, that one's)."""
        for principal in await self.request("GET", "/access/principals"):
            if principal["name"] == name:
                return int(principal["id"])
        if not create:
            raise NotFound(f"no principal named {name!r}")
        try:
            return await self.create_principal(name)
        except Conflict:
            return await self.principal_id(name, create=False)

    async def create_principal(self, name: str) -> int:
        """``POST /access/principals``: a new principal's id (409 if the name is taken)."""
        return int((await self.request("POST", "/access/principals", json={"name": name}))["id"])

    async def grant(self, path: str, principal_id: int, level: str) -> dict[str, Any]:
        """Grant ``level`` (read or write) on the subtree at ``path``, creating it if absent."""
        doc = await self.ensure(path)
        return dict(
            await self.request(
                "POST",
                f"/access/documents/{doc.id}/grants",
                json={"principal_id": principal_id, "level": level},
            )
        )

    async def mint_token(self, principal_id: int, label: str | None = None) -> str:
        """A fresh bearer token for the principal (the server keeps only its hash)."""
        result = await self.request(
            "POST", f"/access/principals/{principal_id}/tokens", json={"label": label}
        )
        return str(result["token"])

    async def whoami_ok(self) -> bool:
        """True if this client's token still authenticates."""
        try:
            await self.request("GET", "/documents/roots")
        except JmftsError:
            return False
        return True


class SyncJmftsClient:
    """:class:`JmftsClient` for code without an event loop (the CLI): each call runs to its end.

    ``with SyncJmftsClient(url, token) as client``; must not be used inside a running loop.
    """

    def __init__(self, base_url: str, token: str, *, timeout_s: float = PATIENT_TIMEOUT_S) -> None:
        self._runner = asyncio.Runner()
        self._client = JmftsClient(base_url, token=token, timeout_s=timeout_s)

    @classmethod
    def from_token_file(cls, base_url: str, token_file: Path) -> SyncJmftsClient:
        """A client using the token stored in ``token_file`` (the admin's by default)."""
        return cls(base_url, read_token_file(token_file))

    def __enter__(self) -> SyncJmftsClient:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool and the event loop."""
        try:
            self._runner.run(self._client.close())
        finally:
            self._runner.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """See :meth:`JmftsClient.request`."""
        return self._runner.run(self._client.request(method, path, **kwargs))

    def roots(self) -> list[Document]:
        """See :meth:`JmftsClient.roots`."""
        return self._runner.run(self._client.roots())

    def resolve(self, path: str) -> Document:
        """See :meth:`JmftsClient.resolve`."""
        return self._runner.run(self._client.resolve(path))

    def put(self, path: str, text: str, *, usetype: str | None = None) -> Document:
        """See :meth:`JmftsClient.put`."""
        return self._runner.run(self._client.put(path, text, usetype=usetype))

    def subtree(self, doc_id: int, max_depth: int | None = None) -> dict[str, Any]:
        """See :meth:`JmftsClient.subtree`."""
        return self._runner.run(self._client.subtree(doc_id, max_depth))

    def search(self, query: str, method: str, limit: int, **filters: Any) -> dict[str, Any]:
        """See :meth:`JmftsClient.search`."""
        return self._runner.run(self._client.search(query, method, limit, **filters))

    def principal_id(self, name: str, *, create: bool) -> int:
        """See :meth:`JmftsClient.principal_id`."""
        return self._runner.run(self._client.principal_id(name, create=create))


def _container_usetype(root_title: str) -> str | None:
    # The `workspace/` root makes its subtree append-only (docs/architecture.md "Workspace").
    return WORKSPACE_USETYPE if root_title == "workspace" else None
