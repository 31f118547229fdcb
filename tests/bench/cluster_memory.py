"""The memory of a three-member home against a home alone, in the cluster benchmark's run.

Through each running ``home up``'s own JMFTS (HTTP, as the admin):

- **write → findable on another member**: a ``POST /documents`` on m1, then
  ``GET /documents/{id}`` on m2 until it answers, timed from the write's start;
- **single write** on m1 (the write waits for the replicated log's majority and for
  m1's own store) against the same write on the home alone (applied at once);
- **search** (hybrid) on m2 against the home alone, the same documents in both;
- **catch-up**: after 10k (and ``BENCH_CLUSTER_CATCHUP``, default 10000,100000)
  documents written through m1 in batches, a new store applies the whole log (as a
  member started with an empty memory directory does) — documents per second.

Part of ``make bench NAME=cluster`` (:mod:`tests.bench.cluster` runs it).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import httpx

from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.locate import HOME_SUBDIR
from home.jmfts.replicated_log import ReplicatedLog
from home.jmfts.store import DocumentStore
from tests.bench.report import Result, quantile
from tests.support.home_cluster import Member

WRITES = int(os.environ.get("BENCH_CLUSTER_WRITES", "200"))
SEARCHES = 100
CATCH_UP = [int(n) for n in os.environ.get("BENCH_CLUSTER_CATCHUP", "10000,100000").split(",")]
BATCH = 200  # documents per batch write: one log entry well under nats' 1 MB payload
FINDABLE_GOAL_P99_MS = 50.0
QUERIES = ("where does my sister live", "when is the piano lesson", "what is the cat called")


async def jmfts(member: Member) -> httpx.AsyncClient:
    """An admin client on ``member``'s memory server (its address from ``home status``)."""
    status = await member.status()
    assert status is not None, f"{member.name} does not answer home status"
    (address,) = [c["address"] for c in status["components"] if c["name"] == "jmfts"]
    token = (member.data_dir / HOME_SUBDIR / "admin.token").read_text().strip()
    return httpx.AsyncClient(
        base_url=address, headers={"Authorization": f"Bearer {token}"}, timeout=60.0
    )


def _text(n: int) -> str:
    return f"note {n}: my sister moved to Lisbon in spring, and the piano lesson is on day {n}."


async def _write(client: httpx.AsyncClient, parent: int, n: int) -> tuple[int, float]:
    started = time.perf_counter()
    response = await client.post("/documents", json={"parent_id": parent, "content": _text(n)})
    response.raise_for_status()
    return int(response.json()["id"]), started


async def _root(client: httpx.AsyncClient, title: str) -> int:
    response = await client.post("/documents", json={"title": title})
    response.raise_for_status()
    return int(response.json()["id"])


async def writes_and_searches(cluster: list[Member], alone: Member) -> list[Result]:
    """Write → findable on m2, single writes on m1 and on the home alone, searches."""
    m1, m2 = await jmfts(cluster[0]), await jmfts(cluster[1])
    lone = await jmfts(alone)
    try:
        parent, lone_parent = await _root(m1, "bench-writes"), await _root(lone, "bench-writes")
        findable, on_m1, on_alone = [], [], []
        for n in range(WRITES):
            doc, started = await _write(m1, parent, n)
            on_m1.append((time.perf_counter() - started) * 1000)
            while (await m2.get(f"/documents/{doc}")).status_code != 200:
                await asyncio.sleep(0.0005)
            findable.append((time.perf_counter() - started) * 1000)
            _, started = await _write(lone, lone_parent, n)
            on_alone.append((time.perf_counter() - started) * 1000)
        searched, searched_alone = [], []
        for n in range(SEARCHES):
            body = {"query": QUERIES[n % len(QUERIES)], "limit": 10}
            for client, into in ((m2, searched), (lone, searched_alone)):
                started = time.perf_counter()
                (await client.post("/search/hybrid", json=body)).raise_for_status()
                into.append((time.perf_counter() - started) * 1000)
    finally:
        for client in (m1, m2, lone):
            await client.aclose()
    results = []
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        results.append(
            Result(
                f"memory write -> findable on another member, {label}",
                round(quantile(findable, q), 2),
                "ms",
                WRITES,
                peer="the write's ack on its own member",
                peer_value=round(quantile(on_m1, q), 2),
                note=f"goal p99 <= {FINDABLE_GOAL_P99_MS:.0f} ms" if q == 0.99 else "",
            )
        )
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        results.append(
            Result(
                f"memory single write, three-member cluster, {label}",
                round(quantile(on_m1, q), 2),
                "ms",
                WRITES,
                peer="home alone",
                peer_value=round(quantile(on_alone, q), 2),
            )
        )
    results.append(
        Result(
            "memory hybrid search on a member, p50",
            round(quantile(searched, 0.5), 2),
            "ms",
            SEARCHES,
            peer="home alone",
            peer_value=round(quantile(searched_alone, 0.5), 2),
        )
    )
    return results


async def catch_up(first: Member) -> list[Result]:
    """Documents through ``first`` in batches up to each size in :data:`CATCH_UP`; after
    each, a new store applies the whole log: documents per second."""
    client = await jmfts(first)
    results = []
    embedder = OnnxMiniLM()
    written = 0
    try:
        parent = await _root(client, "bench-catch-up")
        for size in sorted(CATCH_UP):
            while written < size:
                batch = [
                    {"parent_id": parent, "content": _text(written + i)}
                    for i in range(min(BATCH, size - written))
                ]
                (
                    await client.post("/documents/batch", json={"documents": batch})
                ).raise_for_status()
                written += len(batch)
            seconds, applied = await asyncio.to_thread(_catch_up, first, embedder)
            results.append(
                Result(
                    f"memory catch-up of a new member, {size} documents in the log",
                    round(applied / seconds, 1),
                    "docs/s",
                    applied,
                    note=f"{seconds:.1f} s for {applied} documents",
                    labels={"documents": size},
                )
            )
    finally:
        await client.aclose()
    return results


def _catch_up(first: Member, embedder: OnnxMiniLM) -> tuple[float, int]:
    """(seconds, documents) for an empty store to apply ``first``'s memory log."""
    with tempfile.TemporaryDirectory(prefix="bench-catch-up-") as tmp:
        store = DocumentStore(Path(tmp), embedder)
        log = ReplicatedLog(store, first.admin_url)
        try:
            started = time.perf_counter()
            log.start()
            seconds = time.perf_counter() - started
            with store.lock:
                documents = int(store.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        finally:
            log.close()
            store.close()
    return seconds, documents
