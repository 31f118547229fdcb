"""kill -9 during a write storm, ten times: every acknowledged write survives, is findable
after restart, and the FAISS index agrees with SQLite — with ``synchronous=FULL`` (the
default) and with NORMAL, which gives up only power-loss durability."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from home.jmfts.access import Principal
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.store import DB_FILE, DocumentStore
from tests.home.jmfts.conftest import ServerProcess

ROUNDS = 10
WRITERS = 3
JOIN_TIMEOUT_S = 30.0
FIRST_ACK_TIMEOUT_S = 30.0


def _storm(server: ServerProcess, root: int, round_no: int, acked: dict[int, str]) -> list[Any]:
    lock = threading.Lock()
    stop = threading.Event()

    def write(worker: int) -> None:
        with server.client() as client:
            i = 0
            while not stop.is_set():
                token = "tok" + uuid.uuid4().hex[:12]
                content = f"storm round {round_no} writer {worker} note {i} {token}"
                try:
                    response = client.post(
                        "/documents", json={"parent_id": root, "title": token, "content": content}
                    )
                except httpx.HTTPError:
                    return  # the server died mid-request: this write was never acknowledged
                if response.status_code == 200:
                    with lock:
                        acked[response.json()["id"]] = content
                i += 1

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    return [threads, stop]


def _chunk_count(data: Path) -> int:
    conn = sqlite3.connect(f"file:{data / DB_FILE}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_kill9_write_storm(
    server_factory: Any, tmp_path: Path, embedder: OnnxMiniLM, synchronous: str
) -> None:
    data = tmp_path / "storm"
    sync = ("--synchronous", synchronous)
    server: ServerProcess = server_factory(data, *sync)
    with server.client() as admin:
        root = admin.post("/documents", json={"title": "storm"}).json()["id"]
    acked: dict[int, str] = {}
    rng = random.Random(4)
    for round_no in range(ROUNDS):
        before = len(acked)
        threads, stop = _storm(server, root, round_no, acked)
        # Kill mid-storm: once this round has its first ack (on a loaded machine that can
        # take over a second), then after a random further stretch of writes.
        deadline = time.monotonic() + FIRST_ACK_TIMEOUT_S
        while len(acked) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.2, 0.8))
        server.kill9()
        stop.set()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
            assert not thread.is_alive()
        assert len(acked) > before, f"round {round_no} acknowledged nothing"
        server = server_factory(data, *sync)
        # The restarted server's index holds exactly the vectors SQLite holds.
        assert server.info["vectors"] == _chunk_count(data), server.info
        with server.client() as admin:
            listed = admin.get(f"/documents/{root}/children", params={"limit": 10000}).json()
            present = {d["id"]: d["content"] for d in listed}
            missing = {i: c for i, c in acked.items() if present.get(i) != c}
            assert not missing, f"round {round_no}: lost acknowledged writes {list(missing)[:5]}"
            for doc_id in rng.sample(sorted(acked), 3):  # vector search, via HTTP
                # The exact text the document was embedded as (title, newline, content):
                # its own vector scores 1.0, so it must rank first.
                text = acked[doc_id].split()[-1] + "\n" + acked[doc_id]
                hits = admin.post("/search/vector", json={"query": text, "limit": 3}).json()[
                    "results"
                ]
                assert hits[0]["id"] == doc_id

    with server.client() as admin:
        for doc_id, content in acked.items():
            hits = admin.post(
                "/search/fulltext", json={"query": content.split()[-1], "limit": 1}
            ).json()["results"]
            assert [h["id"] for h in hits] == [doc_id]
    server.stop()

    store = DocumentStore(data, embedder)
    try:
        stored = store.stored_chunk_ids()
        assert set(store.index.ids().tolist()) == set(stored.tolist())
        rows = store.conn.execute("SELECT id, document_id, vector FROM chunks").fetchall()
        by_doc = {r[1]: (r[0], np.frombuffer(r[2], dtype=np.float32)) for r in rows}
        admin = Principal(id=1, name="admin", is_owner=True)
        assert store.count_visible(admin) >= len(acked) + 1  # unacked writes may also land
        for doc_id in acked:
            chunk_id, vector = by_doc[doc_id]
            _, ids = store.index.search(vector, 1)
            assert int(ids[0]) == chunk_id
    finally:
        store.close()
