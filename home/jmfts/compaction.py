"""The store's derived FAISS index: opened and checked against SQLite, rebuilt, saved,
added to and removed from, and compacted (its HNSW tombstones dropped without stopping
writers).

A mixin of :class:`~home.jmfts.store.DocumentStore`. A compaction is started when
removals make one due, and every index change is journalled while one builds.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

from home.jmfts.embedder import Embedder
from home.jmfts.vector_index import IndexKind, VectorIndex, ids_digest

#: Compact an HNSW index once tombstones exceed this share of what it holds (and at
#: least ``COMPACT_MIN`` of them): each costs a little on every search until then.
COMPACT_SHARE = 0.2
COMPACT_MIN = 256


class IndexCompaction:
    """The FAISS index over the stored vectors; the store supplies the lock and rows."""

    lock: threading.RLock
    conn: sqlite3.Connection
    data_dir: Path
    embedder: Embedder
    index: VectorIndex
    index_rebuilt: bool
    last_compaction_s: float | None
    _dirty: bool
    _compactor: threading.Thread | None
    #: Index changes made while a compaction builds its new index, replayed onto it.
    _journal: list[tuple[str, np.ndarray, np.ndarray | None]] | None

    def stored_chunk_ids(self) -> np.ndarray:
        """Every chunk id in SQLite (the truth the index must agree with)."""
        rows = self.conn.execute("SELECT id FROM chunks ORDER BY id").fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def _open_index(self, kind: IndexKind) -> None:
        truth = self.stored_chunk_ids()
        loaded = VectorIndex.load(self.data_dir)
        if loaded is not None:
            index, manifest = loaded
            if (
                manifest.model_name == self.embedder.model_name
                and manifest.dimension == self.embedder.dimension
                and manifest.kind == kind
                and manifest.ids_sha256 == ids_digest(truth)
                and ids_digest(index.ids()) == manifest.ids_sha256
            ):
                self.index = index
                return
        self.rebuild_index(kind)

    def rebuild_index(self, kind: IndexKind | None = None) -> None:
        """Rebuild the FAISS index from the vectors stored in SQLite, and save it."""
        with self.lock:
            index = VectorIndex(self.embedder.dimension, kind or self.index.kind)
            cursor = self.conn.execute("SELECT id, vector FROM chunks ORDER BY id")
            while batch := cursor.fetchmany(20_000):
                ids = np.array([r[0] for r in batch], dtype=np.int64)
                vecs = np.frombuffer(b"".join(r[1] for r in batch), dtype=np.float32)
                index.add(ids, vecs.reshape(len(batch), self.embedder.dimension))
            self.index = index
            self.index_rebuilt = True
            self.save_index()

    def save_index(self) -> None:
        """Persist the FAISS index beside the database."""
        with self.lock:
            self.index.save(self.data_dir, self.embedder.model_name)
            self._dirty = False

    def save_if_dirty(self) -> bool:
        """Persist only when writes happened since the last save."""
        with self.lock:
            if not self._dirty:
                return False
            self.save_index()
            return True

    def _index_add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add to the live index (lock held), journalled while a compaction runs."""
        self.index.add(ids, vectors)
        if self._journal is not None:
            self._journal.append(("add", ids, vectors))
        self._dirty = True

    def _index_remove(self, ids: np.ndarray) -> None:
        """Remove from the live index (lock held); start a compaction when it is due."""
        self.index.remove(ids)
        if self._journal is not None:
            self._journal.append(("remove", ids, None))
        self._dirty = True
        due = self.index.tombstones >= max(
            COMPACT_MIN, COMPACT_SHARE * (self.index.count + self.index.tombstones)
        )
        if due and self._compactor is None:
            self._compactor = threading.Thread(
                target=self._compact_in_background, name="jmfts-compact", daemon=True
            )
            self._compactor.start()

    def wait_for_compaction(self, timeout: float | None = None) -> None:
        """Block until a running background compaction has swapped its index in."""
        compactor = self._compactor
        if compactor is not None:
            compactor.join(timeout)

    def compact_now(self) -> None:
        """Drop the HNSW tombstones synchronously (after any background compaction)."""
        self.wait_for_compaction()
        self._compact()

    def _compact_in_background(self) -> None:
        try:
            self._compact()
        finally:
            self._compactor = None

    def _compact(self) -> None:
        """Rebuild the graph from its live vectors without blocking writers or searches:
        snapshot under the lock, build outside it, replay what changed meanwhile, swap."""
        started = time.perf_counter()
        with self.lock:
            source = self.index
            ids, vectors = source.live_vectors()
            self._journal = []
        fresh = VectorIndex(source.dimension, source.kind)
        fresh.add(ids, vectors)
        with self.lock:
            journal, self._journal = self._journal or [], None
            if self.index is not source:  # rebuilt meanwhile: this copy is stale
                return
            for op, op_ids, op_vectors in journal:
                if op == "add" and op_vectors is not None:
                    fresh.add(op_ids, op_vectors)
                else:
                    fresh.remove(op_ids)
            self.index = fresh
            self._dirty = True
            self.last_compaction_s = time.perf_counter() - started
