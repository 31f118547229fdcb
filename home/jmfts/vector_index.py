"""The FAISS index, derived from the vectors stored in SQLite.

Keyed by chunk id (``IndexIDMap2``), inner product over unit vectors = cosine. ``flat`` is
exact; ``hnsw`` is approximate (graph search, no removal: deleted ids become tombstones
filtered at query time). Saved beside the store with a manifest of model, dimension, kind
and a digest of the id set, so a start can tell a current index from a stale one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import faiss
import numpy as np
import numpy.typing as npt

IndexKind = Literal["flat", "hnsw"]
IdArray = npt.NDArray[np.int64]
Matrix = npt.NDArray[np.float32]

INDEX_FILE = "vectors.faiss"
INDEX_MANIFEST = "vectors.json"


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


class VectorIndex:
    """A FAISS index over (chunk id, unit vector) pairs."""

    def __init__(
        self,
        dimension: int,
        kind: IndexKind = "flat",
        *,
        hnsw_m: int = 32,
        ef_construction: int = 80,
    ) -> None:
        self.dimension = dimension
        self.kind: IndexKind = kind
        self._tombstones: set[int] = set()
        inner: faiss.Index
        if kind == "flat":
            inner = faiss.IndexFlatIP(dimension)
        else:
            inner = faiss.IndexHNSWFlat(dimension, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = ef_construction
            # ef=256: recall@10 0.977 at 100k real documents in tests/bench/jmfts.py
            # (ef=64 gave 0.903), still well under a millisecond per query.
            inner.hnsw.efSearch = 256
        self._index = faiss.IndexIDMap2(inner)

    @property
    def count(self) -> int:
        """Live vectors (tombstones excluded)."""
        return int(self._index.ntotal) - len(self._tombstones)

    def set_ef_search(self, ef: int) -> None:
        """HNSW's search breadth (recall/speed knob); no-op for ``flat``."""
        if self.kind == "hnsw":
            faiss.downcast_index(self._index.index).hnsw.efSearch = ef  # type: ignore[attr-defined]

    def ids(self) -> IdArray:
        """Every live id in the index."""
        stored = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        if not self._tombstones:
            return stored
        return stored[~np.isin(stored, np.fromiter(self._tombstones, dtype=np.int64))]

    def add(self, ids: IdArray, vectors: Matrix) -> None:
        """Add vectors (rows must be unit length)."""
        if len(ids):
            self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)

    def remove(self, ids: IdArray) -> None:
        """Remove ids; HNSW cannot delete, so they become tombstones."""
        if not len(ids):
            return
        if self.kind == "flat":
            # faiss's stubs only know the IDSelector overload; the SWIG wrapper takes arrays.
            self._index.remove_ids(np.asarray(ids, dtype=np.int64))  # type: ignore[arg-type]
        else:
            self._tombstones.update(int(i) for i in ids)

    def search(
        self, query: Matrix, k: int, *, only: IdArray | None = None
    ) -> tuple[npt.NDArray[np.float32], IdArray]:
        """Top-``k`` (scores, ids) for one query row; ``only`` restricts to an id subset."""
        total = int(self._index.ntotal)
        if total == 0 or k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        params = None
        if only is not None:
            if not len(only):
                return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
            selector = faiss.IDSelectorBatch(only.astype(np.int64))
            params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        want = min(total, k + len(self._tombstones))
        scores, ids = self._index.search(
            np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), want, params=params
        )
        keep = ids[0] >= 0
        out_scores, out_ids = scores[0][keep], ids[0][keep].astype(np.int64)
        if self._tombstones:
            live = ~np.isin(out_ids, np.fromiter(self._tombstones, dtype=np.int64))
            out_scores, out_ids = out_scores[live], out_ids[live]
        return out_scores[:k], out_ids[:k]

    def save(self, directory: Path, model_name: str) -> None:
        """Write the index and its manifest atomically (temp file, then rename)."""
        tmp = directory / (INDEX_FILE + ".tmp")
        faiss.write_index(self._index, str(tmp))
        tmp.replace(directory / INDEX_FILE)
        ids = self.ids()
        manifest = IndexManifest(model_name, self.dimension, self.kind, len(ids), ids_digest(ids))
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
        if manifest.kind not in ("flat", "hnsw"):
            return None
        index = cls(manifest.dimension, manifest.kind)  # type: ignore[arg-type]
        if not isinstance(loaded, faiss.IndexIDMap2):
            return None
        index._index = loaded
        return index, manifest
