"""The HNSW default: tombstones never surface, updates are visible, compaction keeps the
live set, and approximate recall against exact search stays above a floor."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from home.jmfts.access import Principal
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.models import DocumentCreate, DocumentUpdate, SearchRequest
from home.jmfts.search import build_filter, nearest_documents, search
from home.jmfts.store import DocumentStore
from home.jmfts.vector_index import EXACT_BELOW, HNSW_EF_SEARCH, VectorIndex

ADMIN = Principal(id=1, name="admin", is_owner=True)
DIM = 32


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    raw = rng.standard_normal((n, DIM)).astype(np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


@pytest.fixture
def store(tmp_path: Path, embedder: OnnxMiniLM) -> Iterator[DocumentStore]:
    store = DocumentStore(tmp_path / "data", embedder)
    try:
        yield store
    finally:
        store.close()


def test_hnsw_is_the_default_index(store: DocumentStore) -> None:
    assert store.index.kind == "hnsw"


def test_recall_against_exact_is_above_a_floor_on_a_fixed_corpus() -> None:
    rng = np.random.default_rng(24)
    n = EXACT_BELOW * 3  # large enough that the graph, not a scan, answers
    vectors = _unit(rng, n)
    index = VectorIndex(DIM, "hnsw")
    index.add(np.arange(1, n + 1, dtype=np.int64), vectors)
    queries = _unit(rng, 50)
    overlap = 0
    for q in queries:
        _, approx = index.search(q, 10)
        _, exact = index.search(q, 10, exact=True)
        overlap += len(set(approx.tolist()) & set(exact.tolist()))
    assert overlap / (10 * len(queries)) >= 0.9


def test_a_loaded_index_searches_as_broadly_as_this_code_says(tmp_path: Path) -> None:
    """FAISS saves efSearch in the file; an index saved with another breadth (an older
    default) searches with today's once loaded."""
    index = VectorIndex(DIM, "hnsw")
    index.add(np.arange(1, 11, dtype=np.int64), _unit(np.random.default_rng(3), 10))
    index.set_ef_search(HNSW_EF_SEARCH * 2)
    index.save(tmp_path, "m")
    loaded = VectorIndex.load(tmp_path)
    assert loaded is not None
    assert loaded[0].ef_search == HNSW_EF_SEARCH


def test_exact_search_over_the_graph_matches_a_flat_index() -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng, 500)
    ids = np.arange(10, 510, dtype=np.int64)
    hnsw, flat = VectorIndex(DIM, "hnsw"), VectorIndex(DIM, "flat")
    hnsw.add(ids, vectors)
    flat.add(ids, vectors)
    hnsw.remove(ids[:50])
    flat.remove(ids[:50])
    only = ids[40:300]
    for q in _unit(rng, 10):
        assert hnsw.search(q, 5, exact=True)[1].tolist() == flat.search(q, 5)[1].tolist()
        got = hnsw.search(q, 5, only=only, exact=True)[1].tolist()
        assert got == flat.search(q, 5, only=only)[1].tolist()
        assert not set(got) & set(ids[:50].tolist())


def test_deleted_vectors_are_never_returned_by_the_graph() -> None:
    rng = np.random.default_rng(9)
    n = EXACT_BELOW * 2
    vectors = _unit(rng, n)
    ids = np.arange(1, n + 1, dtype=np.int64)
    index = VectorIndex(DIM, "hnsw")
    index.add(ids, vectors)
    dead = ids[: n // 2]
    index.remove(dead)
    for row in vectors[:20]:  # each deleted vector is its own best match
        _, found = index.search(row, 10)
        assert not set(found.tolist()) & set(dead.tolist())
        assert len(found) == 10


def test_a_tombstoned_id_cannot_be_reused() -> None:
    index = VectorIndex(DIM, "hnsw")
    index.add(np.array([1], dtype=np.int64), _unit(np.random.default_rng(1), 1))
    index.remove(np.array([1], dtype=np.int64))
    with pytest.raises(ValueError, match="tombstoned"):
        index.add(np.array([1], dtype=np.int64), _unit(np.random.default_rng(2), 1))


def test_updating_the_newest_document_is_visible(store: DocumentStore) -> None:
    """SQLite reuses the id of a deleted last row; the store must not, under a tombstone."""
    doc = store.create(ADMIN, DocumentCreate(title="pet", content="the parrot sings"))
    store.update(ADMIN, doc.id, DocumentUpdate(content="the tortoise sleeps in winter"))
    hits = search(store, ADMIN, "vector", SearchRequest(query="tortoise hibernation"))
    assert [h.id for h in hits.results] == [doc.id]
    assert hits.results[0].score > 0.4


def test_compaction_drops_tombstones_and_keeps_every_live_vector(store: DocumentStore) -> None:
    docs = [
        store.create(ADMIN, DocumentCreate(title=f"n{i}", content=f"note number {i}"))
        for i in range(12)
    ]
    for doc in docs[:6]:
        store.delete(ADMIN, doc.id)
    assert store.index.tombstones == 6
    store.compact_now()
    assert store.index.tombstones == 0
    assert set(store.index.ids().tolist()) == set(store.stored_chunk_ids().tolist())
    flt = build_filter(store, ADMIN, SearchRequest(query="-"))
    qvec = store.embedder.embed(["n7\nnote number 7"])[0]
    assert nearest_documents(store, flt, qvec, 1)[0].doc_id == docs[7].id


def test_exact_flag_is_accepted_and_agrees_on_a_small_tree(store: DocumentStore) -> None:
    a = store.create(ADMIN, DocumentCreate(title="a", content="kayak on the fjord"))
    store.create(ADMIN, DocumentCreate(title="b", content="tax forms due in April"))
    for exact in (False, True):
        request = SearchRequest(query="paddling a kayak", exact=exact)
        assert search(store, ADMIN, "vector", request).results[0].id == a.id


def test_background_compaction_keeps_writes_made_while_it_builds(
    store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    building, release = threading.Event(), threading.Event()

    class HeldIndex(VectorIndex):
        """Holds the compactor's build until the test has written meanwhile."""

        def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
            if threading.current_thread().name == "jmfts-compact":
                building.set()
                assert release.wait(60)
            super().add(ids, vectors)

    monkeypatch.setattr("home.jmfts.compaction.COMPACT_MIN", 4)
    monkeypatch.setattr("home.jmfts.compaction.VectorIndex", HeldIndex)
    docs = [
        store.create(ADMIN, DocumentCreate(title=f"n{i}", content=f"entry {i}")) for i in range(8)
    ]
    for doc in docs[:4]:
        store.delete(ADMIN, doc.id)  # the fourth tombstone starts the compactor
    # Write only once the build has its snapshot: a write before it is in the build, not
    # replayed (on a loaded machine the compactor thread can start late).
    assert building.wait(60)
    late = store.create(ADMIN, DocumentCreate(title="late", content="a late entry"))
    store.delete(ADMIN, docs[4].id)
    release.set()
    store.wait_for_compaction(timeout=60)
    assert store.index.tombstones == 1  # the delete made during the build, replayed
    assert set(store.index.ids().tolist()) == set(store.stored_chunk_ids().tolist())
    hits = search(store, ADMIN, "vector", SearchRequest(query="a late entry", limit=1))
    assert [h.id for h in hits.results] == [late.id]
