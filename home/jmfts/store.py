"""The document store: SQLite (truth) + FAISS (derived), behind one lock.

Every write is prepared first (embedded, no lock held) into a log entry
(:mod:`home.jmfts.write_log`), then applied: rows, full-text entries and vectors in one
SQLite transaction, then the vectors added to FAISS, and only then does it return: a
document is findable by every search method at ack. The derived index, checked at open
against the chunk ids in SQLite and compacted, is :mod:`home.jmfts.compaction`; chunking
and embedding :mod:`home.jmfts.chunk_embedding`; principals, tokens and grants
:mod:`home.jmfts.access_writes`; the group commit of concurrent single writes
:mod:`home.jmfts.write_batcher`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from home.jmfts.access import AccessControl, Principal, Scope
from home.jmfts.access_writes import AccessWrites
from home.jmfts.chunk_embedding import Embedded, embed_document, embed_documents
from home.jmfts.clock import to_stored, utc_now
from home.jmfts.compaction import IndexCompaction
from home.jmfts.db import Synchronous, connect, connect_reader, subtree_range
from home.jmfts.embedder import Embedder
from home.jmfts.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    JmftsError,
    NotFound,
    StoreMismatch,
)
from home.jmfts.models import (
    WORKSPACE_USETYPE,
    DocumentCreate,
    DocumentResponse,
    DocumentUpdate,
)
from home.jmfts.rows import content_hash, document_response, path_ids
from home.jmfts.tree import TreeReads
from home.jmfts.triples import TripleStore
from home.jmfts.vector_index import IndexKind, VectorIndex
from home.jmfts.write_batcher import WriteBatcher
from home.jmfts.write_log import (
    AccessEntry,
    CreateAll,
    CreateEach,
    Delete,
    Entry,
    LocalLog,
    NewDocument,
    Reembed,
    TripleEntry,
    Update,
    WriteLog,
)

DB_FILE = "jmfts.sqlite3"
MAX_CONTENT_CHARS = 2_000_000


class DocumentStore(TreeReads, IndexCompaction, AccessWrites):
    """Documents, access and vectors over one data directory."""

    def __init__(
        self,
        data_dir: Path,
        embedder: Embedder,
        *,
        index_kind: IndexKind = "hnsw",
        synchronous: Synchronous = "FULL",
    ):
        self.data_dir = data_dir
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        data_dir.chmod(0o700)  # memories: readable by their owner only
        self.embedder = embedder
        self.lock = threading.RLock()
        self.conn = connect(data_dir / DB_FILE, synchronous)
        self.access = AccessControl(self.conn)
        # Requests authenticate through their own connection: on the store's, every
        # request waited behind the commit (and its fsync) of the writes before it, and
        # writes that could have joined the next group commit arrived too late for it.
        self._auth_conn = connect_reader(data_dir / DB_FILE)
        self._auth_lock = threading.Lock()
        self._check_model()
        self.index = VectorIndex(embedder.dimension, index_kind)
        self.index_rebuilt = False
        self._dirty = False
        self._issued = 0  # highest chunk id this process handed out (never reused)
        self._compactor: threading.Thread | None = None
        self.last_compaction_s: float | None = None
        #: Index changes made while a compaction builds its new index, replayed onto it.
        self._journal: list[tuple[str, np.ndarray, np.ndarray | None]] | None = None
        self._open_index(index_kind)
        #: Single-document writes from many threads, committed in groups.
        self.writes = WriteBatcher(self)
        #: Where every write is committed: applied here at once, unless a cluster's
        #: replicated log is put in its place (:mod:`home.jmfts.write_log`).
        self.log: WriteLog = LocalLog(self)
        self.triples = TripleStore(self)

    # -- lifecycle ---------------------------------------------------------------------

    def _check_model(self) -> None:
        rows = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        model, dim = rows.get("embedder_model"), rows.get("embedder_dimension")
        if model is None:
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES ('embedder_model', ?),"
                " ('embedder_dimension', ?)",
                (self.embedder.model_name, str(self.embedder.dimension)),
            )
        elif model != self.embedder.model_name or dim != str(self.embedder.dimension):
            raise StoreMismatch(
                f"{self.data_dir / DB_FILE} holds vectors from {model} ({dim}-d); "
                f"refusing to open it with {self.embedder.model_name} "
                f"({self.embedder.dimension}-d)"
            )

    def close(self) -> None:
        """Finish queued writes, wait for a running compaction, save the index and close
        the database."""
        self.writes.close()
        self.wait_for_compaction()
        with self.lock:
            self.save_if_dirty()
            self.conn.close()
        with self._auth_lock:
            self._auth_conn.close()

    def authenticate(self, raw: str | None) -> Principal:
        """The principal a raw bearer token names (see :meth:`AccessControl.authenticate`),
        read without the store lock: a commit in progress does not delay it, and a token
        revoked by a committed write is refused."""
        with self._auth_lock:
            return self.access.authenticate(raw, self._auth_conn)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One SQLite transaction under the store lock; rolled back on any error. Inside
        another (a log entry applied with its sequence number) it is a savepoint of it."""
        with self.lock:
            nested = self.conn.in_transaction
            self.conn.execute("SAVEPOINT nested" if nested else "BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                if nested:
                    self.conn.execute("ROLLBACK TO nested")
                    self.conn.execute("RELEASE nested")
                else:
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("RELEASE nested" if nested else "COMMIT")

    # -- access helpers --------------------------------------------------------------

    def scope(self, principal: Principal) -> Scope:
        """What ``principal`` may read and write."""
        with self.lock:
            return self.access.scope(principal)

    def row(self, doc_id: int) -> sqlite3.Row | None:
        """A document row regardless of access (internal use only)."""
        return self.conn.execute(  # type: ignore[no-any-return]
            "SELECT * FROM documents WHERE id = ?", (doc_id,)
        ).fetchone()

    def visible(self, principal: Principal, doc_id: int) -> sqlite3.Row:
        """The row if ``principal`` may read it; otherwise the same 404 as a missing id."""
        with self.lock:
            row = self.row(doc_id)
            if row is None or not self.access.scope(principal).can_read(row["path"]):
                raise NotFound(f"document {doc_id} not found")
            return row

    def writable(self, principal: Principal, doc_id: int) -> sqlite3.Row:
        """The row if ``principal`` may write it; 404 when invisible, 403 when read-only."""
        row = self.visible(principal, doc_id)
        if not self.scope(principal).can_write(row["path"]):
            raise Forbidden(f"document {doc_id} is read-only for principal {principal.name!r}")
        return row

    def in_workspace(self, path: str) -> bool:
        """Whether a path lies in an append-only workspace subtree."""
        ids = path_ids(path)
        marks = ",".join("?" * len(ids))
        found = self.conn.execute(
            f"SELECT 1 FROM documents WHERE id IN ({marks}) AND usetype = ? LIMIT 1",
            (*ids, WORKSPACE_USETYPE),
        ).fetchone()
        return found is not None

    # -- embedding -----------------------------------------------------------------

    def embed_document(self, title: str | None, content: str | None) -> Embedded:
        """Chunk and embed a document's text (no lock held: this is the slow part)."""
        return embed_document(self.embedder, title, content)

    def embed_many(self, texts: list[tuple[str | None, str | None]]) -> list[Embedded]:
        """Chunk and embed many documents with one batched embedder call."""
        return embed_documents(self.embedder, texts)

    def _next_chunk_id(self) -> int:
        """A chunk id never used before in this index: SQLite alone would reuse the id of a
        deleted last row, which an HNSW tombstone still names."""
        stored = self.conn.execute("SELECT MAX(id) FROM chunks").fetchone()[0] or 0
        return max(int(stored), self.index.high_water(), self._issued) + 1

    def _write_chunks(self, doc_id: int, embedded: Embedded) -> np.ndarray:
        ids = []
        next_id = self._next_chunk_id()
        for idx, ((start, end), vector) in enumerate(
            zip(embedded.spans, embedded.vectors, strict=True)
        ):
            self.conn.execute(
                "INSERT INTO chunks(id, document_id, idx, char_start, char_end, vector)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (next_id, doc_id, idx, start, end, vector.astype(np.float32).tobytes()),
            )
            ids.append(next_id)
            next_id += 1
        self._issued = max(self._issued, next_id - 1)
        return np.array(ids, dtype=np.int64)

    def _drop_chunks(self, doc_ids: list[int]) -> np.ndarray:
        marks = ",".join("?" * len(doc_ids))
        rows = self.conn.execute(
            f"SELECT id FROM chunks WHERE document_id IN ({marks})", doc_ids
        ).fetchall()
        self.conn.execute(f"DELETE FROM chunks WHERE document_id IN ({marks})", doc_ids)
        return np.array([r[0] for r in rows], dtype=np.int64)

    # -- writes: prepared here (no lock held), committed through the log -----------------

    def commit(self, entry: Entry) -> Any:
        """Commit a prepared write through :attr:`log`; its result, or its error raised."""
        return self.log.commit(entry)

    def apply(self, entry: Entry) -> Any:
        """Write a log entry into this store (whoever wrote it); its result, or the error
        its checks raise. The one place entries are applied."""
        match entry:
            case AccessEntry():
                return self.apply_access(entry)
            case TripleEntry():
                return self.triples.apply(entry)
            case _:
                return self._apply_document(entry)

    def _apply_document(self, entry: CreateEach | CreateAll | Update | Delete | Reembed) -> Any:
        match entry:
            case CreateEach():
                result: Any = self._apply_create_each(entry)
            case CreateAll():
                result = self._apply_create_all(entry)
            case Update():
                result = self._apply_update(entry)
            case Delete():
                result = self._apply_delete(entry)
            case Reembed():
                result = self._apply_reembed(entry)
        return result

    def create(self, principal: Principal, request: DocumentCreate) -> DocumentResponse:
        """Create a document; it is embedded, indexed and findable when this returns."""
        return self.create_many(principal, [request])[0]

    def create_many(
        self,
        principal: Principal,
        requests: list[DocumentCreate],
        *,
        embedded: list[Embedded] | None = None,
    ) -> list[DocumentResponse]:
        """Create documents in one transaction (all or none); findable when this returns.

        ``embedded`` passes vectors computed elsewhere (one per request, same embedder);
        otherwise the texts are embedded here in one batched call, before the lock.
        """
        for request in requests:
            _check_size(request.content)
        if embedded is None:
            embedded = self.embed_many([(r.title, r.content) for r in requests])
        if len(embedded) != len(requests):
            raise InvalidInput(f"{len(embedded)} embeddings for {len(requests)} documents")
        entry = CreateAll(at=utc_now(), principal=principal, requests=requests, embedded=embedded)
        return self.commit(entry)  # type: ignore[no-any-return]

    def prepare_each(self, requests: list[DocumentCreate]) -> list[Embedded | JmftsError]:
        """Embed several callers' documents in one embedder call (no lock held); a
        document that is too large gets its own error instead."""
        outcome: list[Embedded | JmftsError] = []
        todo: list[int] = []
        for at, request in enumerate(requests):
            try:
                _check_size(request.content)
            except JmftsError as exc:
                outcome.append(exc)
                continue
            outcome.append(Embedded([], np.zeros((0, self.embedder.dimension), np.float32)))
            todo.append(at)
        texts = [(requests[at].title, requests[at].content) for at in todo]
        for at, embedded in zip(todo, self.embed_many(texts), strict=True):
            outcome[at] = embedded
        return outcome

    def create_each(
        self,
        writes: list[tuple[Principal, DocumentCreate]],
        prepared: list[Embedded | JmftsError] | None = None,
    ) -> list[DocumentResponse | JmftsError]:
        """Create documents for several callers at once: one embedder call, one commit.

        Unlike :meth:`create_many` each write stands alone: one that fails (a missing
        parent, no permission) is rolled back to its savepoint and answered with its own
        error, while the others commit. Every success is findable when this returns.
        ``prepared`` passes :meth:`prepare_each`'s result, computed earlier.
        """
        if prepared is None:
            prepared = self.prepare_each([request for _, request in writes])
        outcome: list[DocumentResponse | JmftsError] = []
        todo: list[tuple[int, NewDocument]] = []
        for at, ((principal, request), embedded) in enumerate(zip(writes, prepared, strict=True)):
            outcome.append(JmftsError("not written"))  # replaced below, in every case
            if isinstance(embedded, JmftsError):
                outcome[at] = embedded
            else:
                todo.append(
                    (at, NewDocument(principal=principal, request=request, embedded=embedded))
                )
        if todo:
            results = self.commit(CreateEach(at=utc_now(), writes=[new for _, new in todo]))
            for (at, _), result in zip(todo, results, strict=True):
                outcome[at] = result
        return outcome

    def _apply_create_all(self, entry: CreateAll) -> list[DocumentResponse]:
        principal, embedded, now = entry.principal, entry.embedded, to_stored(entry.at)
        doc_ids: list[int] = []
        chunk_ids: list[np.ndarray] = []
        with self.transaction() as conn:
            scope = self.access.scope(principal)
            for request, vectors in zip(entry.requests, embedded, strict=True):
                doc_id = self._insert(conn, scope, principal, request, now)
                doc_ids.append(doc_id)
                chunk_ids.append(self._write_chunks(doc_id, vectors))
        with self.lock:
            for ids, vectors in zip(chunk_ids, embedded, strict=True):
                self._index_add(ids, vectors.vectors)
            return [document_response(self._must(doc_id)) for doc_id in doc_ids]

    def _apply_create_each(self, entry: CreateEach) -> list[DocumentResponse | JmftsError]:
        """Each write its own savepoint, answered with its document or its error."""
        outcome: list[DocumentResponse | JmftsError] = []
        now = to_stored(entry.at)
        done: list[tuple[int, int, np.ndarray, Embedded]] = []  # (position, doc, chunks, vectors)
        with self.transaction() as conn:
            scopes: dict[int, Scope] = {}
            for position, write in enumerate(entry.writes):
                principal, request, embedded = write.principal, write.request, write.embedded
                outcome.append(JmftsError("not written"))  # replaced below, in every case
                if principal.id not in scopes:
                    scopes[principal.id] = self.access.scope(principal)
                conn.execute("SAVEPOINT one_write")
                try:
                    doc_id = self._insert(conn, scopes[principal.id], principal, request, now)
                    chunk_ids = self._write_chunks(doc_id, embedded)
                except JmftsError as exc:
                    conn.execute("ROLLBACK TO one_write")
                    outcome[position] = exc
                else:
                    done.append((position, doc_id, chunk_ids, embedded))
                conn.execute("RELEASE one_write")
        with self.lock:
            for position, doc_id, chunk_ids, embedded in done:
                self._index_add(chunk_ids, embedded.vectors)
                outcome[position] = document_response(self._must(doc_id))
        return outcome

    def _insert(
        self,
        conn: sqlite3.Connection,
        scope: Scope,
        principal: Principal,
        request: DocumentCreate,
        now: str,
    ) -> int:
        parent = None
        if request.parent_id is not None:
            parent = self.row(request.parent_id)
            if parent is None or not scope.can_read(parent["path"]):
                raise NotFound(f"parent document {request.parent_id} not found")
            if not scope.can_write(parent["path"]):
                raise Forbidden(f"document {request.parent_id} is read-only for you")
        elif not principal.is_owner:
            raise Forbidden("only the owner principal may create root documents")
        supersedes = request.supersedes
        if supersedes is None and request.structured_content:
            raw = request.structured_content.get("supersedes")
            supersedes = raw if isinstance(raw, int) else None
        if supersedes is not None:
            self._check_supersedes(scope, parent, supersedes)
        position = self._next_position(parent, request.sequential)
        cur = conn.execute(
            "INSERT INTO documents(parent_id, path, depth, title, content,"
            " structured_content, usetype, position, author_id, supersedes, created_at,"
            " updated_at, event_time, content_hash) VALUES"
            " (?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                request.parent_id,
                0 if parent is None else parent["depth"] + 1,
                request.title,
                request.content,
                json.dumps(request.structured_content or {}),
                request.usetype,
                position,
                principal.id,
                supersedes,
                now,
                now,
                to_stored(request.event_time) if request.event_time else None,
                content_hash(request.content),
            ),
        )
        doc_id = int(cur.lastrowid or 0)
        path = ("/" if parent is None else parent["path"]) + f"{doc_id}/"
        conn.execute("UPDATE documents SET path = ? WHERE id = ?", (path, doc_id))
        conn.execute(
            "INSERT INTO documents_fts(rowid, title, content) VALUES (?, ?, ?)",
            (doc_id, request.title or "", request.content or ""),
        )
        return doc_id

    def _check_supersedes(self, scope: Scope, parent: sqlite3.Row | None, old_id: int) -> None:
        old = self.row(old_id)
        if old is None or not scope.can_read(old["path"]):
            raise NotFound(f"superseded record {old_id} not found")
        if parent is None or not self.in_workspace(parent["path"]):
            raise InvalidInput("supersedes is only meaningful for a record inside a workspace")

    def _next_position(self, parent: sqlite3.Row | None, sequential: bool | None) -> int | None:
        if parent is None or sequential is False:
            return None
        if sequential is None and parent["position"] is None:
            return None
        last = self.conn.execute(
            "SELECT MAX(position) FROM documents WHERE parent_id = ?", (parent["id"],)
        ).fetchone()[0]
        return 0 if last is None else int(last) + 1

    def _must(self, doc_id: int) -> sqlite3.Row:
        row = self.row(doc_id)
        if row is None:
            raise NotFound(f"document {doc_id} not found")
        return row

    def update(
        self, principal: Principal, doc_id: int, request: DocumentUpdate
    ) -> DocumentResponse:
        """Update fields (and re-embed when text changed), or move under a new parent."""
        _check_size(request.content)
        current = self.writable(principal, doc_id)
        _refuse_in_workspace(self, current, "append a record")
        title = request.title if request.title is not None else current["title"]
        content = request.content if request.content is not None else current["content"]
        text_changed = (title, content) != (current["title"], current["content"])
        embedded = self.embed_document(title, content) if text_changed else None
        entry = Update(
            at=utc_now(),
            principal=principal,
            document_id=doc_id,
            request=request,
            embedded=embedded,
        )
        return self.commit(entry)  # type: ignore[no-any-return]

    def _apply_update(self, entry: Update) -> DocumentResponse:
        principal, doc_id, request = entry.principal, entry.document_id, entry.request
        with self.transaction() as conn:
            current = self.writable(principal, doc_id)
            _refuse_in_workspace(self, current, "append a record")
            title = request.title if request.title is not None else current["title"]
            content = request.content if request.content is not None else current["content"]
            sets: dict[str, Any] = {"updated_at": to_stored(entry.at)}
            if request.title is not None:
                sets["title"] = request.title
            if request.content is not None:
                sets["content"] = request.content
                sets["content_hash"] = content_hash(request.content)
            if request.usetype is not None:
                sets["usetype"] = request.usetype
            if request.structured_content is not None:
                sets["structured_content"] = json.dumps(request.structured_content)
            assignments = ", ".join(f"{k} = ?" for k in sets)
            conn.execute(
                f"UPDATE documents SET {assignments} WHERE id = ?", (*sets.values(), doc_id)
            )
            if request.parent_id is not None and request.parent_id != current["parent_id"]:
                self._move(principal, current, request.parent_id)
            removed = np.zeros(0, dtype=np.int64)
            added = np.zeros(0, dtype=np.int64)
            if entry.embedded is not None:
                conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
                conn.execute(
                    "INSERT INTO documents_fts(rowid, title, content) VALUES (?, ?, ?)",
                    (doc_id, title or "", content or ""),
                )
                removed = self._drop_chunks([doc_id])
                added = self._write_chunks(doc_id, entry.embedded)
        with self.lock:
            if entry.embedded is not None:
                self._index_remove(removed)
                self._index_add(added, entry.embedded.vectors)
            return document_response(self._must(doc_id))

    def _move(self, principal: Principal, doc: sqlite3.Row, new_parent_id: int) -> None:
        target = self.row(new_parent_id)
        scope = self.access.scope(principal)
        if target is None or not scope.can_read(target["path"]):
            raise NotFound(f"new parent {new_parent_id} not found")
        if not scope.can_write(target["path"]):
            raise Forbidden(f"document {new_parent_id} is read-only for you")
        if target["path"].startswith(doc["path"]):
            raise InvalidInput(f"moving {doc['id']} under {new_parent_id} would make a cycle")
        if self.in_workspace(target["path"]):
            raise Conflict("records cannot be moved into an append-only workspace")
        old_path = doc["path"]
        new_path = target["path"] + f"{doc['id']}/"
        delta = target["depth"] + 1 - doc["depth"]
        lo, hi = subtree_range(old_path)
        self.conn.execute(
            "UPDATE documents SET path = ? || substr(path, ?), depth = depth + ?"
            " WHERE path >= ? AND path < ?",
            (new_path, len(old_path) + 1, delta, lo, hi),
        )
        self.conn.execute(
            "UPDATE documents SET parent_id = ? WHERE id = ?", (new_parent_id, doc["id"])
        )

    def delete(self, principal: Principal, doc_id: int) -> list[int]:
        """Delete a document and its subtree; returns the ids removed."""
        _refuse_in_workspace(self, self.writable(principal, doc_id), "it cannot be deleted")
        return self.commit(Delete(at=utc_now(), principal=principal, document_id=doc_id))  # type: ignore[no-any-return]

    def _apply_delete(self, entry: Delete) -> list[int]:
        with self.transaction() as conn:
            current = self.writable(entry.principal, entry.document_id)
            _refuse_in_workspace(self, current, "it cannot be deleted")
            lo, hi = subtree_range(current["path"])
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM documents WHERE path >= ? AND path < ?", (lo, hi)
                )
            ]
            removed = self._drop_chunks(ids)
            marks = ",".join("?" * len(ids))
            conn.execute(f"DELETE FROM documents_fts WHERE rowid IN ({marks})", ids)
            conn.execute(f"DELETE FROM documents WHERE id IN ({marks})", ids)
        with self.lock:
            self._index_remove(removed)
        return ids

    def reembed(self, principal: Principal, doc_id: int) -> int:
        """Recompute one document's vectors (``POST /documents/{id}/embed``)."""
        row = self.writable(principal, doc_id)
        embedded = self.embed_document(row["title"], row["content"])
        entry = Reembed(at=utc_now(), principal=principal, document_id=doc_id, embedded=embedded)
        return self.commit(entry)  # type: ignore[no-any-return]

    def _apply_reembed(self, entry: Reembed) -> int:
        doc_id = entry.document_id
        with self.transaction():
            self.writable(entry.principal, doc_id)
            removed = self._drop_chunks([doc_id])
            added = self._write_chunks(doc_id, entry.embedded)
        with self.lock:
            self._index_remove(removed)
            self._index_add(added, entry.embedded.vectors)
        return len(added)


def _refuse_in_workspace(store: DocumentStore, row: sqlite3.Row, edit: str) -> None:
    if store.in_workspace(row["path"]):
        raise Conflict(f"document {row['id']} is in an append-only workspace; {edit}")


def _check_size(content: str | None) -> None:
    if content is not None and len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(
            f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}"
        )
