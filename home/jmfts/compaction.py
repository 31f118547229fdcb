"""Compaction of the store's HNSW index: its tombstones dropped without stopping writers.

A mixin of :class:`~home.jmfts.store.DocumentStore`, which decides when a compaction is
due (as it removes vectors) and journals every index change while one builds.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from home.jmfts.vector_index import VectorIndex


class IndexCompaction:
    """Rebuilds ``index`` from its live vectors; the store supplies the lock and journal."""

    lock: threading.RLock
    index: VectorIndex
    last_compaction_s: float | None
    _dirty: bool
    _compactor: threading.Thread | None
    #: Index changes made while a compaction builds its new index, replayed onto it.
    _journal: list[tuple[str, np.ndarray, np.ndarray | None]] | None

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
