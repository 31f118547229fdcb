"""The FAISS index, derived from the vectors stored in SQLite.

Keyed by chunk id (``IndexIDMap2``), inner product over unit vectors = cosine. ``hnsw``
(the default) is approximate graph search; ``flat`` is exact. HNSW cannot remove a
vector, so a deleted id becomes a tombstone, filtered at query time and dropped for good
by :meth:`VectorIndex.compacted` (the store runs it in the background once tombstones
pile up). Exact search stays available on an HNSW index — its graph keeps every vector in
a flat storage — per request, for narrow filters, and automatically below
``EXACT_BELOW`` vectors, where scanning them all is faster than walking the graph.
Saved beside the store with a manifest of model, dimension, kind, tombstones and a digest
of the live id set, so a start can tell a current index from a stale one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import faiss
import numpy as np
import numpy.typing as npt

IndexKind = Literal["flat", "hnsw"]
IdArray = npt.NDArray[np.int64]
Matrix = npt.NDArray[np.float32]
Scores = npt.NDArray[np.float32]

INDEX_FILE = "vectors.faiss"
INDEX_MANIFEST = "vectors.json"
#: Below this many live vectors a scan costs about what the graph does, and is exact
#: (tests/bench/jmfts.py at 10k real documents, bare index p50: flat 0.55 ms, HNSW
#: ef 256 0.29 ms; a scan grows linearly, so they meet near 5k).
EXACT_BELOW = 4_096
#: A filter admitting at most this many vectors is scanned exactly: the graph's recall
#: collapses when most of its nodes are filtered out, and a small scan is cheap anyway.
EXACT_SUBSET = 20_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
#: Measured on this index (M 32, efConstruction 80) at 100k real documents, bare index,
#: recall@10 against exact search / p50: ef 64 0.952 / 0.23 ms, ef 96 0.968 / 0.34 ms,
#: ef 128 0.976 / 0.52 ms, ef 256 0.982 / 0.88 ms (tests/bench/jmfts.py). 96 keeps recall
#: above 0.95 at well under half the cost of 256; a larger efConstruction or M moved
#: the curve too little to pay for slower writes.
HNSW_EF_SEARCH = 96


def ids_digest(ids: IdArray) -> str:
    """Order-independent digest of an id set (sorted int64 bytes)."""
    return hashlib.sha256(np.sort(ids.astype(np.int64)).tobytes()).hexdigest()


@dataclass(frozen=True)
class IndexManifest:
    """What a saved index claims to hold."""

    model_name: str
    dimension: int
    kind: str
    count: int
    ids_sha256: str
    tombstones: list[int] = field(default_factory=list)


def _empty() -> tuple[Scores, IdArray]:
    return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)


class VectorIndex:
    """A FAISS index over (chunk id, unit vector) pairs."""

    def __init__(
        self,
        dimension: int,
        kind: IndexKind = "hnsw",
        *,
        hnsw_m: int = HNSW_M,
        ef_construction: int = HNSW_EF_CONSTRUCTION,
    ) -> None:
        self.dimension = dimension
        self.kind: IndexKind = kind
        self._tombstones: set[int] = set()
        self._labels: IdArray | None = None  # cache of the id map, position -> chunk id
        inner: faiss.Index
        if kind == "flat":
            inner = faiss.IndexFlatIP(dimension)
        else:
            inner = faiss.IndexHNSWFlat(dimension, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = ef_construction
            inner.hnsw.efSearch = HNSW_EF_SEARCH
        self._index = faiss.IndexIDMap2(inner)

    @property
    def count(self) -> int:
        """Live vectors (tombstones excluded)."""
        return int(self._index.ntotal) - len(self._tombstones)

    @property
    def tombstones(self) -> int:
        """Deleted ids still held in the graph."""
        return len(self._tombstones)

    def high_water(self) -> int:
        """The largest id ever added and still held (tombstones included); 0 when empty."""
        labels = self._stored_labels()
        return int(labels.max()) if len(labels) else 0

    @property
    def ef_search(self) -> int | None:
        """HNSW's search breadth; ``None`` for ``flat``."""
        if self.kind != "hnsw":
            return None
        return int(faiss.downcast_index(self._index.index).hnsw.efSearch)  # type: ignore[attr-defined]

    def set_ef_search(self, ef: int) -> None:
        """HNSW's search breadth (recall/speed knob); no-op for ``flat``."""
        if self.kind == "hnsw":
            faiss.downcast_index(self._index.index).hnsw.efSearch = ef  # type: ignore[attr-defined]

    def _stored_labels(self) -> IdArray:
        if self._labels is None:
            self._labels = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        return self._labels

    def _dead(self) -> IdArray:
        return np.fromiter(self._tombstones, dtype=np.int64, count=len(self._tombstones))

    def ids(self) -> IdArray:
        """Every live id in the index."""
        stored = self._stored_labels()
        if not self._tombstones:
            return stored.copy()
        return stored[~np.isin(stored, self._dead())]

    def add(self, ids: IdArray, vectors: Matrix) -> None:
        """Add vectors (rows must be unit length) under ids never used before in this index.

        A tombstoned id still names a vector in the graph, so reusing it would hide the new
        vector: the store allocates chunk ids above :meth:`high_water`.
        """
        if not len(ids):
            return
        if self._tombstones and np.isin(ids, self._dead()).any():
            raise ValueError("cannot reuse a tombstoned id before compaction")
        self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
        self._labels = None

    def remove(self, ids: IdArray) -> None:
        """Remove ids; HNSW cannot delete, so they become tombstones."""
        if not len(ids):
            return
        if self.kind == "flat":
            # faiss's stubs only know the IDSelector overload; the SWIG wrapper takes arrays.
            self._index.remove_ids(np.asarray(ids, dtype=np.int64))  # type: ignore[arg-type]
            self._labels = None
        else:
            self._tombstones.update(int(i) for i in ids)

    def uses_exact(self, exact: bool, only: IdArray | None) -> bool:
        """Whether a search with these arguments scans every vector instead of the graph."""
        return (
            self.kind == "flat"
            or exact
            or self.count <= EXACT_BELOW
            or (only is not None and len(only) <= EXACT_SUBSET)
        )

    def search(
        self, query: Matrix, k: int, *, only: IdArray | None = None, exact: bool = False
    ) -> tuple[Scores, IdArray]:
        """Top-``k`` (scores, ids) for one query row; ``only`` restricts to an id subset.

        ``exact`` forces a full scan; small indexes and narrow filters scan anyway.
        """
        total = int(self._index.ntotal)
        if total == 0 or k <= 0 or (only is not None and not len(only)):
            return _empty()
        row = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        want = min(total, k + len(self._tombstones))
        if self.kind == "hnsw" and self.uses_exact(exact, only):
            scores, ids = self._scan_storage(row, want, only)
        else:
            params = None
            if only is not None:
                selector = faiss.IDSelectorBatch(only.astype(np.int64))
                params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
            found_scores, found_ids = self._index.search(row, want, params=params)
            keep = found_ids[0] >= 0
            scores, ids = found_scores[0][keep], found_ids[0][keep].astype(np.int64)
        if self._tombstones:
            live = ~np.isin(ids, self._dead())
            scores, ids = scores[live], ids[live]
        return scores[:k], ids[:k]

    def _scan_storage(self, row: Matrix, want: int, only: IdArray | None) -> tuple[Scores, IdArray]:
        """Exact search over the HNSW graph's flat storage (positions mapped to ids)."""
        storage = faiss.downcast_index(
            faiss.downcast_index(self._index.index).storage  # type: ignore[attr-defined]
        )
        labels = self._stored_labels()
        params = None
        if only is not None:
            positions = np.flatnonzero(np.isin(labels, only)).astype(np.int64)
            if not len(positions):
                return _empty()
            selector = faiss.IDSelectorBatch(positions)
            params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        scores, positions_found = storage.search(row, want, params=params)
        keep = positions_found[0] >= 0
        return scores[0][keep], labels[positions_found[0][keep]]

    def live_vectors(self) -> tuple[IdArray, Matrix]:
        """Every live (id, vector) pair, read back from the index itself."""
        labels = self._stored_labels()
        total = len(labels)
        vectors = self._index.index.reconstruct_n(0, total) if total else np.zeros((0, 0))
        keep = ~np.isin(labels, self._dead()) if self._tombstones else slice(None)
        return labels[keep], np.asarray(vectors, dtype=np.float32).reshape(total, -1)[keep]

    def compacted(self) -> VectorIndex:
        """A new index of the same kind holding only the live vectors (no tombstones)."""
        ids, vectors = self.live_vectors()
        fresh = VectorIndex(self.dimension, self.kind)
        fresh.add(ids, vectors)
        return fresh

    def save(self, directory: Path, model_name: str) -> None:
        """Write the index and its manifest atomically (temp file, then rename)."""
        tmp = directory / (INDEX_FILE + ".tmp")
        faiss.write_index(self._index, str(tmp))
        tmp.replace(directory / INDEX_FILE)
        ids = self.ids()
        manifest = IndexManifest(
            model_name,
            self.dimension,
            self.kind,
            len(ids),
            ids_digest(ids),
            sorted(self._tombstones),
        )
        tmp_manifest = directory / (INDEX_MANIFEST + ".tmp")
        tmp_manifest.write_text(json.dumps(manifest.__dict__, sort_keys=True))
        tmp_manifest.replace(directory / INDEX_MANIFEST)

    @classmethod
    def load(cls, directory: Path) -> tuple[VectorIndex, IndexManifest] | None:
        """Load a saved index, or ``None`` when absent or unreadable (the caller rebuilds)."""
        try:
            raw = json.loads((directory / INDEX_MANIFEST).read_text())
            manifest = IndexManifest(**raw)
            loaded = faiss.read_index(str(directory / INDEX_FILE))
        except (OSError, ValueError, TypeError, RuntimeError):
            return None
        if manifest.kind not in ("flat", "hnsw") or not isinstance(loaded, faiss.IndexIDMap2):
            return None
        index = cls(manifest.dimension, manifest.kind)  # type: ignore[arg-type]
        index._index = loaded
        # The file keeps the efSearch it was saved with; the breadth is this code's choice.
        index.set_ef_search(HNSW_EF_SEARCH)
        index._tombstones = {int(i) for i in manifest.tombstones}
        return index, manifest
