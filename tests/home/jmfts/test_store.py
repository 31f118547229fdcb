"""The store in-process: findable at ack, chunking, index persistence and rebuild."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from home.jmfts.access import Principal
from home.jmfts.db import connect
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.errors import InvalidInput, StoreMismatch
from home.jmfts.models import DocumentCreate, DocumentUpdate, SearchRequest
from home.jmfts.search import search
from home.jmfts.store import DB_FILE, DocumentStore
from home.jmfts.vector_index import INDEX_FILE, INDEX_MANIFEST

ADMIN = Principal(id=1, name="admin", is_owner=True)


@pytest.fixture
def store(tmp_path: Path, embedder: OnnxMiniLM) -> Iterator[DocumentStore]:
    store = DocumentStore(tmp_path / "data", embedder)
    store.bootstrap_admin()
    try:
        yield store
    finally:
        store.close()


def _ids(store: DocumentStore, method: str, query: str) -> list[int]:
    response = search(store, ADMIN, method, SearchRequest(query=query, limit=5))
    return [hit.id for hit in response.results]


def test_create_and_update_are_findable_at_ack(store: DocumentStore) -> None:
    root = store.create(ADMIN, DocumentCreate(title="journal"))
    doc = store.create(
        ADMIN,
        DocumentCreate(parent_id=root.id, title="dentist", content="Dentist appointment on Friday"),
    )
    for method in ("vector", "fulltext", "hybrid"):
        assert _ids(store, method, "dentist appointment")[0] == doc.id, method
    store.update(ADMIN, doc.id, DocumentUpdate(content="Piano lesson moved to Monday"))
    for method in ("vector", "fulltext", "hybrid"):
        assert _ids(store, method, "piano lesson")[0] == doc.id, method
    assert doc.id not in _ids(store, "fulltext", "appointment friday")


def test_long_text_is_found_by_a_late_chunk(store: DocumentStore) -> None:
    filler = " ".join(f"The ledger line {i} records an ordinary entry." for i in range(150))
    tail = "Finally, the lighthouse keeper fed the cormorants sardines."
    doc = store.create(ADMIN, DocumentCreate(title="long", content=filler + " " + tail))
    chunks = store.conn.execute(
        "SELECT COUNT(*) FROM chunks WHERE document_id = ?", (doc.id,)
    ).fetchone()[0]
    assert chunks > 3
    response = search(
        store, ADMIN, "vector", SearchRequest(query="lighthouse keeper feeding birds")
    )
    assert response.results[0].id == doc.id
    assert "lighthouse" in response.results[0].snippet


def test_delete_removes_vectors_from_index(store: DocumentStore) -> None:
    doc = store.create(ADMIN, DocumentCreate(title="tmp", content="ephemeral quokka note"))
    before = store.index.count
    store.delete(ADMIN, doc.id)
    assert store.index.count < before
    assert doc.id not in _ids(store, "vector", "quokka")
    assert set(store.index.ids().tolist()) == set(store.stored_chunk_ids().tolist())


def test_index_is_saved_verified_and_rebuilt(tmp_path: Path, embedder: OnnxMiniLM) -> None:
    data = tmp_path / "data"
    first = DocumentStore(data, embedder)
    ids = [
        first.create(ADMIN, DocumentCreate(title=f"n{i}", content=f"note {i}")).id for i in range(5)
    ]
    first.close()

    reopened = DocumentStore(data, embedder)
    assert not reopened.index_rebuilt  # the saved index matched SQLite
    assert reopened.index.count == 5
    reopened.close()

    (data / INDEX_FILE).unlink()
    missing = DocumentStore(data, embedder)
    assert missing.index_rebuilt
    assert set(missing.index.ids().tolist()) == set(missing.stored_chunk_ids().tolist())
    missing.close()

    # A stale index (a write after the last save, as after kill -9) is detected and rebuilt.
    conn = sqlite3.connect(data / DB_FILE)
    conn.execute(
        "INSERT INTO chunks(document_id, idx, char_start, char_end, vector) VALUES (?, 1, 0, 1, ?)",
        (ids[0], np.ones(384, dtype=np.float32).tobytes()),
    )
    conn.commit()
    conn.close()
    stale = DocumentStore(data, embedder)
    assert stale.index_rebuilt and stale.index.count == 6
    stale.close()
    assert (data / INDEX_MANIFEST).is_file()


def test_store_refuses_another_embedder_model(tmp_path: Path, embedder: OnnxMiniLM) -> None:
    data = tmp_path / "data"
    DocumentStore(data, embedder).close()
    conn = sqlite3.connect(data / DB_FILE)
    conn.execute("UPDATE meta SET value = '768' WHERE key = 'embedder_dimension'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreMismatch, match="768"):
        DocumentStore(data, embedder)


def test_hnsw_index_kind_deletes_by_tombstone_and_reopens_clean(
    tmp_path: Path, embedder: OnnxMiniLM
) -> None:
    data = tmp_path / "hnsw"
    store = DocumentStore(data, embedder, index_kind="hnsw")
    keep = store.create(ADMIN, DocumentCreate(title="keep", content="harbour seals bask"))
    gone = store.create(ADMIN, DocumentCreate(title="gone", content="harbour seals dive"))
    store.delete(ADMIN, gone.id)
    assert _ids(store, "vector", "harbour seals") == [keep.id]
    store.close()
    reopened = DocumentStore(data, embedder, index_kind="hnsw")
    try:
        assert not reopened.index_rebuilt  # the tombstone was saved with the graph
        assert set(reopened.index.ids().tolist()) == set(reopened.stored_chunk_ids().tolist())
        assert _ids(reopened, "vector", "harbour seals") == [keep.id]
    finally:
        reopened.close()


def test_the_database_and_its_journals_are_private(tmp_path: Path) -> None:
    """Before: jmfts.sqlite3, -wal and -shm were 0644, and any local user read memories."""
    path = tmp_path / DB_FILE
    previous = os.umask(0o022)
    try:
        conn = connect(path)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('probe', '1')")
        modes = {
            suffix: stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode)
            for suffix in ("", "-wal", "-shm")
        }
        conn.close()
        os.chmod(path, 0o644)  # left by an earlier version: tightened on the next open
        connect(path).close()
    finally:
        os.umask(previous)
    assert modes == {"": 0o600, "-wal": 0o600, "-shm": 0o600}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_store_from_before_private_predicates_gains_the_creator_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE predicates (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
        " namespace TEXT, description TEXT, iri TEXT UNIQUE, created_at TEXT NOT NULL)"
    )
    old.execute("INSERT INTO predicates(name, created_at) VALUES ('likes', 'then')")
    old.commit()
    old.close()
    conn = connect(path)
    (row,) = conn.execute("SELECT name, created_by FROM predicates")
    assert (row["name"], row["created_by"]) == ("likes", None)  # shared, as it always was
    conn.close()


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_synchronous_setting_reaches_sqlite(tmp_path: Path, synchronous: str) -> None:
    conn = connect(tmp_path / DB_FILE, synchronous)  # type: ignore[arg-type]
    try:
        # SQLite reports the level as a number: 1 NORMAL, 2 FULL.
        level = conn.execute("PRAGMA synchronous").fetchone()[0]
        assert level == {"NORMAL": 1, "FULL": 2}[synchronous]
    finally:
        conn.close()


def test_unknown_synchronous_setting_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"'OFF'.*FULL or NORMAL"):
        connect(tmp_path / DB_FILE, "OFF")  # type: ignore[arg-type]
