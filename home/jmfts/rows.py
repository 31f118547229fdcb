"""Row-level helpers shared by the store, search and tree reads (pure, no I/O of their own)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from home.jmfts.clock import from_stored
from home.jmfts.errors import InvalidInput
from home.jmfts.models import DocumentResponse


def path_ids(path: str) -> list[int]:
    """``/1/5/9/`` -> ``[1, 5, 9]``."""
    return [int(p) for p in path.strip("/").split("/") if p]


def usetype_clause(
    column: str, usetype: str | list[str] | None, exclude: list[str] | None
) -> tuple[str, list[str]]:
    """SQL for a positive usetype glob set (overrides exclusion) or an exclusion list."""
    if usetype is not None:
        globs = usetype.split(",") if isinstance(usetype, str) else list(usetype)
        globs = [g.strip() for g in globs]
        if not globs or any(not g for g in globs):
            raise InvalidInput("usetype names an empty glob; omit it to search every usetype")
        return "(" + " OR ".join(f"{column} GLOB ?" for _ in globs) + ")", globs
    if not exclude:
        return "1", []
    return (
        "("
        + column
        + " IS NULL OR NOT ("
        + " OR ".join(f"{column} GLOB ?" for _ in exclude)
        + "))",
        list(exclude),
    )


def document_response(
    row: sqlite3.Row, embed: list[float] | None = None, *, with_path: bool = True
) -> DocumentResponse:
    """A document row on the wire; ``with_path=False`` leaves ``path`` empty (subtree answers)."""
    return DocumentResponse(
        id=row["id"],
        parent_id=row["parent_id"],
        title=row["title"],
        content=row["content"],
        structured_content=json.loads(row["structured_content"] or "{}"),
        path=path_ids(row["path"]) if with_path else [],
        depth=row["depth"],
        usetype=row["usetype"],
        position=row["position"],
        created_at=from_stored(row["created_at"]),
        updated_at=from_stored(row["updated_at"]),
        event_time=from_stored(row["event_time"]),
        content_hash=row["content_hash"],
        embed=embed,
        author_id=row["author_id"],
        supersedes=row["supersedes"],
    )


def embed_text(title: str | None, content: str | None) -> str:
    """What a document is embedded and full-text indexed as."""
    return "\n".join(part for part in (title, content) if part)


def narrow(
    where: str,
    params: list[Any],
    usetype: str | None,
    title: str | None,
    title_prefix: str | None,
) -> tuple[str, list[Any]]:
    if usetype is not None:
        where += " AND d.usetype GLOB ?"
        params.append(usetype)
    if title is not None:
        where += " AND d.title = ?"
        params.append(title)
    if title_prefix is not None:
        where += " AND substr(d.title, 1, ?) = ?"
        params += [len(title_prefix), title_prefix]
    return where, params


def content_hash(content: str | None) -> str | None:
    """sha256 of a document's content (``None`` for no content)."""
    return None if content is None else hashlib.sha256(content.encode()).hexdigest()
