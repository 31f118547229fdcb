"""Group commit: concurrent single writes share a batch, yet each caller gets its own ack
or its own error, and every acked document is findable the moment its ack returns."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from home.jmfts.access import Principal
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.errors import Forbidden, JmftsError, NotFound
from home.jmfts.models import DocumentCreate, DocumentResponse, SearchRequest
from home.jmfts.search import search
from home.jmfts.store import DocumentStore
from home.jmfts.write_batcher import BatcherClosed, WriteBatcher

ADMIN = Principal(id=1, name="admin", is_owner=True)
JOIN_TIMEOUT_S = 60.0


@pytest.fixture
def store(tmp_path: Path, embedder: OnnxMiniLM) -> Iterator[DocumentStore]:
    store = DocumentStore(tmp_path / "data", embedder)
    store.bootstrap_admin()
    try:
        yield store
    finally:
        store.close()


def _run_concurrently(
    batcher: WriteBatcher, writes: list[tuple[Principal, DocumentCreate]], store: DocumentStore
) -> list[DocumentResponse | JmftsError]:
    answers: list[DocumentResponse | JmftsError | None] = [None] * len(writes)
    found_at_ack: list[bool] = [False] * len(writes)
    start = threading.Barrier(len(writes))

    def write(at: int) -> None:
        principal, request = writes[at]
        start.wait(JOIN_TIMEOUT_S)
        try:
            doc = batcher.submit(principal, request)
        except JmftsError as exc:
            answers[at] = exc
            return
        answers[at] = doc
        hits = search(store, ADMIN, "fulltext", SearchRequest(query=request.title or "", limit=1))
        found_at_ack[at] = [h.id for h in hits.results] == [doc.id]

    threads = [threading.Thread(target=write, args=(at,)) for at in range(len(writes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
        assert not thread.is_alive()
    for answer, found in zip(answers, found_at_ack, strict=True):
        assert answer is not None
        assert found or isinstance(answer, JmftsError)
    return [a for a in answers if a is not None]


def test_concurrent_writes_share_a_batch_and_keep_their_own_answers(
    store: DocumentStore,
) -> None:
    root = store.create(ADMIN, DocumentCreate(title="inbox"))
    guest = Principal(id=99, name="guest", is_owner=False)
    writes = [
        (ADMIN, DocumentCreate(parent_id=root.id, title=f"zebra{i}", content=f"stripe {i}"))
        for i in range(6)
    ]
    writes.insert(2, (ADMIN, DocumentCreate(parent_id=10_000, title="orphan", content="x")))
    writes.insert(5, (guest, DocumentCreate(title="rootless", content="not allowed")))
    # A window long enough that all eight land in one batch on a busy machine.
    batcher = WriteBatcher(store, max_batch=16, window_s=0.5)
    try:
        answers = _run_concurrently(batcher, writes, store)
    finally:
        batcher.close()
    assert isinstance(answers[2], NotFound)
    assert isinstance(answers[5], Forbidden)
    good = [a for at, a in enumerate(answers) if at not in (2, 5)]
    assert all(isinstance(a, DocumentResponse) for a in good)
    titles = sorted(a.title or "" for a in good if isinstance(a, DocumentResponse))
    assert titles == [f"zebra{i}" for i in range(6)]
    assert max(batcher.batch_sizes) > 1
    assert sum(batcher.batch_sizes) == len(writes)
    assert store.count_visible(ADMIN) == 7  # the root and six writes; the failures left nothing


def test_a_lone_write_is_committed_without_waiting_for_company(store: DocumentStore) -> None:
    doc = store.writes.submit(ADMIN, DocumentCreate(title="solo", content="a lone heron"))
    hits = search(store, ADMIN, "vector", SearchRequest(query="heron", limit=1))
    assert [h.id for h in hits.results] == [doc.id]
    assert store.writes.batch_sizes == [1]


def test_a_closed_batcher_refuses_writes(store: DocumentStore) -> None:
    batcher = WriteBatcher(store)
    batcher.submit(ADMIN, DocumentCreate(title="before"))
    batcher.close()
    with pytest.raises(BatcherClosed):
        batcher.submit(ADMIN, DocumentCreate(title="after"))
