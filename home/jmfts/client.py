"""``MemoryClient``: the small synchronous HTTP client behind ``home memory``.

Speaks our JMFTS API and adds titled-path addressing (``workspace/notes/x``): a path is
resolved segment by segment through roots and children, and ``put`` creates missing
parents. Inside a workspace, ``put`` of an existing leaf appends a record that supersedes
it (the server refuses in-place edits there with 409).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from home.jmfts.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    JmftsError,
    NotFound,
    Unauthorized,
)
from home.jmfts.models import WORKSPACE_USETYPE

_BY_STATUS: dict[int, type[JmftsError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: InvalidInput,
}

Doc = dict[str, Any]


def split_path(path: str) -> list[str]:
    """``/workspace//notes/x/`` -> ``["workspace", "notes", "x"]``; empty is an error."""
    parts = [p for p in path.strip().split("/") if p]
    if not parts:
        raise InvalidInput(f"path {path!r} names no document")
    return parts


class MemoryClient:
    """Synchronous client for a running JMFTS server."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    @classmethod
    def from_token_file(cls, url: str, token_file: Path) -> MemoryClient:
        """A client using the token stored in ``token_file`` (the admin's by default)."""
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise InvalidInput(f"{token_file}: cannot read the token file ({exc})") from exc
        return cls(url, token)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; non-2xx raises the matching :mod:`home.jmfts.errors` class."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise JmftsError(f"{method} {path}: cannot reach JMFTS ({exc})") from exc
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            cls = _BY_STATUS.get(response.status_code, JmftsError)
            raise cls(f"{method} {path} -> {response.status_code}: {detail}")
        return response.json() if response.content else None

    # -- paths ----------------------------------------------------------------------

    def _child(self, parent: Doc | None, title: str) -> Doc | None:
        if parent is None:
            found = [d for d in self.request("GET", "/documents/roots") if d["title"] == title]
        else:
            found = self.request(
                "GET", f"/documents/{parent['id']}/children", params={"title": title}
            )
        # In a workspace several records share a title: the newest is the current one.
        return max(found, key=lambda d: d["id"]) if found else None

    def resolve(self, path: str) -> Doc:
        """The document at a titled path, or an id given as ``#12`` / ``12``."""
        text = path.strip().lstrip("#")
        if text.isdigit():
            return dict(self.request("GET", f"/documents/{int(text)}"))
        doc: Doc | None = None
        for part in split_path(path):
            doc = self._child(doc, part)
            if doc is None:
                raise NotFound(f"no document at {path!r} (missing segment {part!r})")
        if doc is None:  # split_path never returns an empty list
            raise InvalidInput(f"path {path!r} names no document")
        return doc

    def put(self, path: str, text: str, *, usetype: str | None = None) -> Doc:
        """Write ``text`` at ``path``, creating parents; returns the written document."""
        parts = split_path(path)
        parent: Doc | None = None
        for part in parts[:-1]:
            found = self._child(parent, part)
            if found is None:
                found = self._create(parent, part, None, _container_usetype(parent, part))
            parent = found
        leaf = parts[-1]
        existing = self._child(parent, leaf)
        if existing is None:
            return self._create(parent, leaf, text, usetype)
        try:
            body: Doc = {"content": text}
            if usetype is not None:
                body["usetype"] = usetype
            return dict(self.request("PATCH", f"/documents/{existing['id']}", json=body))
        except Conflict:
            return self._create(parent, leaf, text, usetype, supersedes=existing["id"])

    def ensure(self, path: str) -> Doc:
        """The document at ``path``, creating it and its parents as empty containers if absent."""
        parent: Doc | None = None
        for part in split_path(path):
            found = self._child(parent, part)
            if found is None:
                found = self._create(parent, part, None, _container_usetype(parent, part))
            parent = found
        if parent is None:  # split_path never returns an empty list
            raise InvalidInput(f"path {path!r} names no document")
        return parent

    def grant(self, path: str, principal_id: int, level: str) -> Doc:
        """Grant ``level`` (read or write) on the subtree at ``path``, creating it if absent."""
        doc = self.ensure(path)
        return dict(
            self.request(
                "POST",
                f"/access/documents/{doc['id']}/grants",
                json={"principal_id": principal_id, "level": level},
            )
        )

    def mint_token(self, principal_id: int, label: str | None = None) -> str:
        """A fresh bearer token for the principal (the server keeps only its hash)."""
        result = self.request(
            "POST", f"/access/principals/{principal_id}/tokens", json={"label": label}
        )
        return str(result["token"])

    def whoami_ok(self) -> bool:
        """True if this client's token still authenticates."""
        try:
            self.request("GET", "/documents/roots")
        except JmftsError:
            return False
        return True

    def _create(
        self,
        parent: Doc | None,
        title: str,
        content: str | None,
        usetype: str | None,
        *,
        supersedes: int | None = None,
    ) -> Doc:
        body: Doc = {"title": title, "content": content, "usetype": usetype}
        if parent is not None:
            body["parent_id"] = parent["id"]
        if supersedes is not None:
            body["supersedes"] = supersedes
        return dict(self.request("POST", "/documents", json=body))

    # -- other verbs -----------------------------------------------------------------

    def subtree(self, doc_id: int, max_depth: int | None = None) -> Doc:
        """``GET /documents/{id}/subtree``."""
        params = {"max_depth": max_depth} if max_depth is not None else None
        return dict(self.request("GET", f"/documents/{doc_id}/subtree", params=params))

    def roots(self) -> list[Doc]:
        """``GET /documents/roots``."""
        return list(self.request("GET", "/documents/roots"))

    def search(self, query: str, method: str, limit: int, **filters: Any) -> Doc:
        """``POST /search/{method}``."""
        body = {
            "query": query,
            "limit": limit,
            **{k: v for k, v in filters.items() if v is not None},
        }
        return dict(self.request("POST", f"/search/{method}", json=body))

    def principal_id(self, name: str, *, create: bool) -> int:
        """The id of the principal called ``name`` (created when asked)."""
        for principal in self.request("GET", "/access/principals"):
            if principal["name"] == name:
                return int(principal["id"])
        if not create:
            raise NotFound(f"no principal named {name!r}")
        return int(self.request("POST", "/access/principals", json={"name": name})["id"])


def _container_usetype(parent: Doc | None, title: str) -> str | None:
    # The `workspace/` root makes its subtree append-only (docs/architecture.md "Workspace").
    return WORKSPACE_USETYPE if parent is None and title == "workspace" else None
