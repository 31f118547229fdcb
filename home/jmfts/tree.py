"""Tree reads of the document store: get, children, subtree, ancestors, roots, listings.

A mixin of :class:`~home.jmfts.store.DocumentStore`; every read goes through the
principal's scope, so a document it was not granted is never returned nor counted.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import numpy as np

from home.jmfts.access import AccessControl, Principal, Scope
from home.jmfts.db import subtree_range
from home.jmfts.models import DocumentResponse
from home.jmfts.rows import document_response, narrow, path_ids


class TreeReads:
    """Read methods over ``conn``; the store supplies the lock, access and visibility."""

    lock: threading.RLock
    conn: sqlite3.Connection
    access: AccessControl

    def visible(self, principal: Principal, doc_id: int) -> sqlite3.Row:
        """The row if readable, else :class:`~home.jmfts.errors.NotFound` (the store's)."""
        raise NotImplementedError

    def scope(self, principal: Principal) -> Scope:
        """What ``principal`` may read and write (the store's)."""
        raise NotImplementedError

    def document_vector(self, doc_id: int) -> list[float] | None:
        """The mean of a document's chunk vectors, renormalised (``include_embed``)."""
        rows = self.conn.execute(
            "SELECT vector FROM chunks WHERE document_id = ? ORDER BY idx", (doc_id,)
        ).fetchall()
        if not rows:
            return None
        matrix = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32)
        mean = matrix.reshape(len(rows), -1).mean(axis=0)
        return [float(x) for x in mean / max(float(np.linalg.norm(mean)), 1e-12)]

    def get(
        self, principal: Principal, doc_id: int, *, include_embed: bool = False
    ) -> DocumentResponse:
        """One visible document."""
        with self.lock:
            row = self.visible(principal, doc_id)
            return document_response(row, self.document_vector(doc_id) if include_embed else None)

    def query(
        self,
        principal: Principal,
        where: str,
        params: list[Any],
        *,
        order: str = "d.position IS NULL, d.position, d.id",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[sqlite3.Row]:
        """Visible documents matching ``where`` (internal building block)."""
        with self.lock:
            clause, scope_params = self.access.scope(principal).sql()
            sql = f"SELECT d.* FROM documents d WHERE {clause} AND ({where}) ORDER BY {order}"
            args: list[Any] = [*scope_params, *params]
            if limit is not None:
                sql += " LIMIT ? OFFSET ?"
                args += [limit, offset]
            return list(self.conn.execute(sql, args))

    def children(
        self,
        principal: Principal,
        doc_id: int,
        *,
        depth: int = 1,
        usetype: str | None = None,
        title: str | None = None,
        title_prefix: str | None = None,
        limit: int = 100,
    ) -> list[DocumentResponse]:
        """Children (``depth=1``), descendants to a depth, or all of them (``depth=-1``)."""
        parent = self.visible(principal, doc_id)
        lo, hi = subtree_range(parent["path"])
        where, params = "d.path >= ? AND d.path < ? AND d.id != ?", [lo, hi, doc_id]
        if depth >= 0:
            where += " AND d.depth <= ?"
            params.append(parent["depth"] + max(depth, 1))
        where, params = narrow(where, params, usetype, title, title_prefix)
        rows = self.query(principal, where, params, limit=limit)
        return [document_response(r) for r in rows]

    def subtree(
        self,
        principal: Principal,
        doc_id: int,
        *,
        max_depth: int | None,
        usetype: str | None,
        paths: bool = False,
    ) -> tuple[DocumentResponse, list[DocumentResponse]]:
        """A document and its visible descendants, depth first by path.

        The descendants' ``path`` is empty unless ``paths``: each is placed by
        ``parent_id`` and ``depth`` under the root, whose own path is always given.
        A chain (τ stores each entry under the one before) would otherwise answer
        ids that grow with the square of its length (docs/architecture.md "Sessions").
        """
        root = self.visible(principal, doc_id)
        lo, hi = subtree_range(root["path"])
        where, params = "d.path >= ? AND d.path < ? AND d.id != ?", [lo, hi, doc_id]
        if max_depth is not None:
            where += " AND d.depth <= ?"
            params.append(root["depth"] + max_depth)
        where, params = narrow(where, params, usetype, None, None)
        rows = self.query(principal, where, params, order="d.depth, d.position, d.id")
        return document_response(root), [document_response(r, with_path=paths) for r in rows]

    def ancestors(self, principal: Principal, doc_id: int) -> list[DocumentResponse]:
        """Visible ancestors, root first (the document itself excluded)."""
        row = self.visible(principal, doc_id)
        ids = path_ids(row["path"])[:-1]
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.query(principal, f"d.id IN ({marks})", ids, order="d.depth")
        return [document_response(r) for r in rows]

    def roots(self, principal: Principal) -> list[DocumentResponse]:
        """Top-level documents this principal sees: true roots, or its grant roots.

        Each carries its ``titled_path``: an agent granted ``journal/a`` and
        ``workspace/a`` sees two roots titled ``a``, told apart only by their paths.
        """
        if principal.is_owner:
            rows = self.query(principal, "d.parent_id IS NULL", [], order="d.id")
        else:
            rows = self._grant_roots(principal)
        paths = self.titled_paths(rows)
        return [
            document_response(r).model_copy(update={"titled_path": paths.get(r["id"])})
            for r in rows
        ]

    def _grant_roots(self, principal: Principal) -> list[sqlite3.Row]:
        scope = self.scope(principal)
        tops = [
            p
            for p in scope.read_paths or ()
            if not any(p != q and p.startswith(q) for q in scope.read_paths or ())
        ]
        ids = [path_ids(p)[-1] for p in tops]
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self.query(principal, f"d.id IN ({marks})", ids, order="d.id")

    def list_documents(
        self,
        principal: Principal,
        *,
        parent_id: int | None,
        usetype: str | None,
        title_prefix: str | None,
        limit: int,
        offset: int,
    ) -> list[DocumentResponse]:
        """A page of visible documents, optionally under one parent."""
        where, params = "1", []
        if parent_id is not None:
            self.visible(principal, parent_id)
            where, params = "d.parent_id = ?", [parent_id]
        where, params = narrow(where, params, usetype, None, title_prefix)
        rows = self.query(principal, where, params, order="d.id", limit=limit, offset=offset)
        return [document_response(r) for r in rows]

    def titled_paths(self, rows: list[sqlite3.Row]) -> dict[int, str]:
        """``workspace/notes/x`` for each row, from its ancestors' titles."""
        wanted = {i for r in rows for i in path_ids(r["path"])}
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        with self.lock:
            titles = dict(
                self.conn.execute(
                    f"SELECT id, COALESCE(title, '#' || id) FROM documents WHERE id IN ({marks})",
                    list(wanted),
                ).fetchall()
            )
        return {
            r["id"]: "/".join(titles.get(i, f"#{i}") for i in path_ids(r["path"])) for r in rows
        }

    def count_visible(self, principal: Principal) -> int:
        """How many documents ``principal`` can read (never a corpus-wide count)."""
        with self.lock:
            clause, params = self.access.scope(principal).sql()
            return int(
                self.conn.execute(
                    f"SELECT COUNT(*) FROM documents d WHERE {clause}", params
                ).fetchone()[0]
            )
