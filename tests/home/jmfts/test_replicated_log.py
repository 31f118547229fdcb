"""Memory stores as views of one replicated log, on a real JetStream nats-server.

Two stores (two members' JMFTS) commit through ``JMFTS_LOG``: what is written on one
is applied by the other, row for row; a member that restarts applies nothing twice;
a member wiped and started again catches up from the log before it serves, and
answers searches as the others do. Writes from both members at once end in the
same rows on both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nats
import pytest
from fastapi.testclient import TestClient

from home.jmfts.app import create_app
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.errors import LogUnavailable
from home.jmfts.models import DocumentCreate
from home.jmfts.replicated_log import STREAM, SUBJECT, ReplicatedLog
from home.jmfts.store import DocumentStore
from tests.home.jmfts.test_write_log import TABLES, _ok, _rows, _write_a_household
from tests.support.loopback_nats import loopback_nats_server

SETTLE_S = 30.0


@pytest.fixture
def jetstream_url(tmp_path: Path) -> Iterator[str]:
    with loopback_nats_server("-js", "-sd", str(tmp_path / "js")) as url:
        yield url


class Member:
    """One member's store, committing through the replicated log."""

    def __init__(self, data_dir: Path, embedder: OnnxMiniLM, url: str) -> None:
        self.store = DocumentStore(data_dir, embedder)
        self.log = ReplicatedLog(self.store, lambda: url)
        self.log.start()
        self.store.log = self.log

    def close(self) -> None:
        self.log.close()
        self.store.close()


def _same_rows(one: Member, other: Member) -> None:
    other.log.wait_applied(one.log.sequence, SETTLE_S)
    one.log.wait_applied(other.log.sequence, SETTLE_S)
    rows_one, rows_other = _rows(one.store), _rows(other.store)
    for table in TABLES:
        assert rows_other[table] == rows_one[table], table


def test_members_are_views_of_one_log(
    tmp_path: Path, embedder: OnnxMiniLM, jetstream_url: str
) -> None:
    a = Member(tmp_path / "a", embedder, jetstream_url)
    b = c = None
    try:
        a.store.bootstrap_admin()
        token = (a.store.data_dir / "admin.token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(a.store), headers=headers) as client:
            _write_a_household(client)
        assert a.log.counts["refused"] >= 1  # the taken principal name

        b = Member(tmp_path / "b", embedder, jetstream_url)
        assert b.log.sequence == a.log.sequence  # caught up before it serves
        _same_rows(a, b)

        # Writes on both members at once (A's admin token works on B: its hash is in B).
        with (
            TestClient(create_app(a.store), headers=headers) as on_a,
            TestClient(create_app(b.store), headers=headers) as on_b,
        ):
            home = _ok(on_b.post("/documents", json={"title": "from b", "content": "Ana moved"}))

            def write(n: int) -> None:
                client = on_a if n % 2 else on_b
                _ok(
                    client.post(
                        "/documents",
                        json={"parent_id": home["id"], "content": f"note {n} from both"},
                    )
                )

            with ThreadPoolExecutor(4) as pool:
                list(pool.map(write, range(12)))
            _same_rows(a, b)
            body = {"query": "where did Ana move", "limit": 5}
            found_a = _ok(on_a.post("/search/hybrid", json=body))["results"]
            assert found_a == _ok(on_b.post("/search/hybrid", json=body))["results"]
            assert any(hit["id"] == home["id"] for hit in found_a)

        # A restart applies nothing twice; a wiped member catches up from the log.
        b.close()
        before = b.log.sequence
        b = Member(tmp_path / "b", embedder, jetstream_url)
        assert b.log.sequence == before
        assert sum(b.log.counts.values()) == 0
        _same_rows(a, b)
        c = Member(tmp_path / "c-wiped", embedder, jetstream_url)
        assert c.log.counts["applied"] > 0
        _same_rows(a, c)
    finally:
        for each in (a, b, c):
            if each is not None:
                each.close()


def test_a_write_the_store_refuses_is_refused_to_its_writer_and_logged_once(
    tmp_path: Path, embedder: OnnxMiniLM, jetstream_url: str
) -> None:
    a = Member(tmp_path / "a", embedder, jetstream_url)
    try:
        owner, _ = a.store.bootstrap_admin()
        with pytest.raises(Exception, match="not found") as refused:
            a.store.create_many(owner, [DocumentCreate(parent_id=424242, content="orphan")])
        assert getattr(refused.value, "status_code", None) == 404
        assert a.log.counts["refused"] == 1
        (kept,) = a.store.create_many(owner, [DocumentCreate(content="the next write")])
        assert a.store.row(kept.id) is not None
    finally:
        a.close()


HOSTILE = [
    b"",
    b"\xff\xfe not utf-8",
    b"[" * 5000 + b"]" * 5000,
    b'{"op": "delete", "at": "2026-01-01T00:00:00Z"}',
    b'{"op": "create_principal", "at": "not a time", "name": "x"}',
    b'{"op": "grant", "at": "2026-01-01T00:00:00Z", "document_id": "1; DROP", '
    b'"principal_id": 1, "level": "write"}',
    json.dumps({"op": "create_principal", "at": "2026-01-01T00:00:00Z", "name": "\ud800"}).encode(),
    b'{"op": "create_principal", "at": "2026-01-01T00:00:00Z", "name": "' + b"n" * 900_000 + b'"}',
    b'{"op": "revoke_token", "at": "2026-01-01T00:00:00Z", "token_id": 1180591620717411303424}',
    b'{"op": "delete_principal", "at": "2026-01-01T00:00:00Z", "principal_id": -1}',
]


def test_hostile_log_entries_are_counted_and_the_next_write_is_served(
    tmp_path: Path, embedder: OnnxMiniLM, jetstream_url: str
) -> None:
    """Whatever another bus user publishes on the log's subject, each member refuses it
    by name (counted, logged), keeps its sequence moving and serves the next write."""
    a = Member(tmp_path / "a", embedder, jetstream_url)
    try:
        owner, _ = a.store.bootstrap_admin()

        async def publish() -> None:
            nc = await nats.connect(jetstream_url)
            try:
                for data in HOSTILE:
                    await nc.jetstream().publish(SUBJECT, data, stream=STREAM)
            finally:
                await nc.close()

        asyncio.run(publish())
        (kept,) = a.store.create_many(owner, [DocumentCreate(content="served after junk")])
        assert a.store.row(kept.id) is not None
        refused = a.log.counts["malformed"] + a.log.counts["refused"]
        assert refused == len(HOSTILE), a.log.counts
        assert a.log.counts["malformed"] >= len(HOSTILE) - 3
        assert "entry" in a.log.last_error
    finally:
        a.close()


def test_a_memory_written_alone_does_not_join_the_log_silently(
    tmp_path: Path, embedder: OnnxMiniLM, jetstream_url: str
) -> None:
    """A home's store that ran alone (rows, no log sequence) is refused by name: its
    rows are in no log, so applying the others' entries on top would split the stores."""
    alone = DocumentStore(tmp_path / "alone", embedder)
    alone.bootstrap_admin()
    alone.close()
    store = DocumentStore(tmp_path / "alone", embedder)
    try:
        with pytest.raises(LogUnavailable, match="written outside the home's log"):
            ReplicatedLog(store, lambda: jetstream_url).start()
    finally:
        store.close()
