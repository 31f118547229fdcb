"""JMFTS on FAISS vs Chroma (``chromadb`` local persistent client), same embeddings.

Measures, in one run: embedder throughput; ingest documents/s at 10k and 100k real
documents (JMFTS: SQLite rows + FTS5 + vectors + FAISS, one transaction per 1000; Chroma:
``collection.add`` per 1000); single durable writes with embedding and write->findable
latency; vector search p50/p99 at 10k and 100k (JMFTS's full search path with its default
HNSW index and with ``exact: true``; bare FAISS flat and an HNSW ef sweep) with recall@10
against exact, Chroma's HNSW beside them;
and at 1M synthetic vectors, exact vs approximate (IVF) with recall@10.

The corpus is real text: paragraphs of the documentation and docstrings installed in this
venv (deterministic order), embedded once with the project's ONNX all-MiniLM-L6-v2 and
cached under ``bench-results/cache``. Queries are the first words of held-out paragraphs.
Sizes can be lowered for a quick look: ``JMFTS_BENCH_SIZES=2000,10000``, and the 1M
synthetic run skipped with ``JMFTS_BENCH_SYNTHETIC=0``. ``JMFTS_BENCH_CORPUS=int8`` embeds
the corpus and queries with the int8 graph (about 2.5× sooner on a busy machine) for the
size rows; both systems get the same vectors, so the comparison stays fair.

Also, from :mod:`tests.bench.jmfts_writes`: one ``POST /documents`` at a time from one
client and from eight (group commit), against Chroma's ``add()`` of one document; and
from :mod:`tests.bench.jmfts_conversation`: recall of the evidence turn on a generated
conversational corpus for every search mode, beside a plain BM25 baseline.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chromadb
import faiss
import numpy as np
from rich.console import Console

from home.jmfts.access import Principal
from home.jmfts.chunk_embedding import Embedded
from home.jmfts.config import JmftsConfig
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.models import DocumentCreate, SearchRequest
from home.jmfts.search import build_filter, nearest_documents
from home.jmfts.store import DocumentStore
from home.jmfts.vector_index import VectorIndex
from tests.bench.jmfts_conversation import bench_conversation
from tests.bench.jmfts_writes import bench_writes
from tests.bench.report import RESULTS_DIR, Result, publish

console = Console()
ADMIN = Principal(id=1, name="admin", is_owner=True)
QUERIES = 200
K = 10
BATCH = 1000
SINGLE_WRITES = 150
SYNTHETIC = 1_000_000
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 40
HNSW_EF_SWEEP = (32, 64, 128, 256)
IVF_LISTS, IVF_PROBES = 1024, 16


def _sizes() -> list[int]:
    raw = os.environ.get("JMFTS_BENCH_SIZES", "10000,100000")
    return [int(x) for x in raw.split(",") if x.strip()]


def load_corpus(n: int) -> list[str]:
    """``n`` distinct prose-like paragraphs from files installed in this environment."""
    root = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    files = sorted(
        p for ext in ("*.md", "*.rst", "*.txt", "*.py") for p in (root / "site-packages").rglob(ext)
    )
    seen: set[str] = set()
    out: list[str] = []
    for path in files:
        try:
            text = path.read_text(errors="ignore")
        except OSError:
            continue
        for block in re.split(r"\n\s*\n", text):
            para = " ".join(block.split())
            if not 40 <= len(para) <= 250 or para in seen:
                continue
            if sum(c.isalpha() or c == " " for c in para) < 0.85 * len(para):
                continue
            seen.add(para)
            out.append(para)
            if len(out) >= n:
                return out
    raise RuntimeError(f"only {len(out)} paragraphs found; need {n}")


def embed_cached(embedder: OnnxMiniLM, texts: list[str], tag: str) -> np.ndarray:
    """Embed once per (texts, model graph); later runs read the cache."""
    digest = hashlib.sha256("\x00".join([embedder.model_name, *texts]).encode()).hexdigest()[:16]
    cache = RESULTS_DIR / "cache" / f"{tag}-{len(texts)}-{digest}.npy"
    if cache.is_file():
        return np.load(cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    out = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    step = 4096
    with console.status(f"embedding {len(texts)} {tag} texts…") as status:
        for start in range(0, len(texts), step):
            out[start : start + step] = embedder.embed(texts[start : start + step])
            status.update(f"embedding {tag}: {min(start + step, len(texts))}/{len(texts)}")
    np.save(cache, out)
    return out


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    arr = np.array(samples) * 1000
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 99))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def recall_at_k(truth: list[list[int]], found: list[list[int]]) -> float:
    hits = sum(len(set(t[:K]) & set(f[:K])) for t, f in zip(truth, found, strict=True))
    return hits / (K * len(truth))


class Chroma:
    """One persistent Chroma collection (cosine space), fed our vectors."""

    def __init__(self, path: Path) -> None:
        self.client = chromadb.PersistentClient(
            path=str(path), settings=chromadb.Settings(anonymized_telemetry=False)
        )
        self.collection = self.client.create_collection(
            "bench", metadata={"hnsw:space": "cosine"}, embedding_function=None
        )

    def add(self, ids: list[int], vectors: np.ndarray, texts: list[str]) -> None:
        self.collection.add(ids=[str(i) for i in ids], embeddings=vectors, documents=texts)

    def query(self, vector: np.ndarray) -> list[int]:
        result = self.collection.query(query_embeddings=[vector], n_results=K)
        return [int(i) for i in result["ids"][0]]


def jmfts_ingest(store: DocumentStore, root: int, texts: list[str], vecs: np.ndarray) -> float:
    """Seconds to ingest ``texts`` with precomputed vectors, 1000 per transaction."""
    start = time.perf_counter()
    for at in range(0, len(texts), BATCH):
        chunk = texts[at : at + BATCH]
        requests = [
            DocumentCreate(parent_id=root, title=f"p{at + i}", content=t)
            for i, t in enumerate(chunk)
        ]
        embedded = [
            Embedded([(0, len(f"p{at + i}\n{t}"))], vecs[at + i : at + i + 1])
            for i, t in enumerate(chunk)
        ]
        store.create_many(ADMIN, requests, embedded=embedded)
    return time.perf_counter() - start


def bench_size(
    n: int,
    texts: list[str],
    vecs: np.ndarray,
    qvecs: np.ndarray,
    embedder: OnnxMiniLM,
    work: Path,
    results: list[Result],
    fresh: list[str],
) -> None:
    console.rule(f"{n} real documents")
    store = DocumentStore(work / f"jmfts-{n}", embedder)
    root = store.create(ADMIN, DocumentCreate(title="corpus")).id
    chroma = Chroma(work / f"chroma-{n}")

    seconds = jmfts_ingest(store, root, texts[:n], vecs[:n])
    # One chunk per corpus document, in insertion order: these ids key every index below
    # (and Chroma), so recall compares like with like.
    ids = np.array(
        [
            r[0]
            for r in store.conn.execute(
                "SELECT id FROM chunks WHERE document_id != ? ORDER BY id", (root,)
            )
        ],
        dtype=np.int64,
    )
    chroma_seconds, _ = timed(
        lambda: [
            chroma.add(ids[a : a + BATCH].tolist(), vecs[a : a + BATCH], texts[a : a + BATCH])
            for a in range(0, n, BATCH)
        ]
    )
    results.append(
        Result(
            f"ingest docs/s @{n} (precomputed vectors)",
            n / seconds,
            "docs/s",
            n,
            "chroma",
            n / chroma_seconds,
            note="JMFTS: SQLite+FTS5+FAISS HNSW, fsync'd commit per 1000; chroma add per 1000",
        )
    )

    hnsw = VectorIndex(
        embedder.dimension, "hnsw", hnsw_m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION
    )
    build, _ = timed(lambda: hnsw.add(ids, vecs[:n]))
    default_index = store.index  # the server's own index: HNSW, built as documents came
    chunk_of = dict(
        store.conn.execute("SELECT document_id, id FROM chunks WHERE document_id != ?", (root,))
    )
    flat = VectorIndex(embedder.dimension, "flat")  # ground truth over exactly `ids`
    flat.add(ids, vecs[:n])
    flt = build_filter(store, ADMIN, SearchRequest(query="-"))

    # Interleaved per query, so load from other processes on this shared machine falls on
    # every system alike.
    times: dict[str, list[float]] = {key: [] for key in ("path", "exact_path", "flat", "chroma")}
    times.update({f"ef{ef}": [] for ef in HNSW_EF_SWEEP})
    found: dict[str, list[list[int]]] = {key: [] for key in times}

    def path(*, exact: bool) -> Callable[[np.ndarray], list[int]]:
        def run(q: np.ndarray) -> list[int]:
            hits = nearest_documents(store, flt, q, K, exact=exact)
            return [chunk_of[h.doc_id] for h in hits]  # one chunk per document

        return run

    def bare(index: VectorIndex, ef: int | None = None) -> Callable[[np.ndarray], list[int]]:
        def run(q: np.ndarray) -> list[int]:
            if ef is not None:
                index.set_ef_search(ef)
            return list(index.search(q, K)[1].tolist())

        return run

    probes: dict[str, Callable[[np.ndarray], list[int]]] = {
        "path": path(exact=False),
        "exact_path": path(exact=True),
        "flat": bare(flat),
        "chroma": chroma.query,
        **{f"ef{ef}": bare(hnsw, ef) for ef in HNSW_EF_SWEEP},
    }
    order = np.random.default_rng(n)
    for q in qvecs:
        # A fresh random order per query: no system always runs first (cold caches,
        # sleeping thread pools) on this shared machine.
        for key in order.permutation(sorted(probes)):
            t, hit_ids = timed(lambda q=q, key=key: probes[key](q))
            times[key].append(t)
            found[key].append(hit_ids)
    truth = found["flat"]
    chroma_recall = recall_at_k(truth, found["chroma"])
    c50, c99 = percentiles(times["chroma"])
    rows = [
        (
            "path",
            f"JMFTS default ({default_index.kind}"
            f"{', exact scan' if default_index.uses_exact(False, None) else ''}),"
            " full search path",
            recall_at_k(truth, found["path"]),
        ),
        (
            "exact_path",
            "JMFTS exact: true, full search path",
            recall_at_k(truth, found["exact_path"]),
        ),
        ("flat", "FAISS flat (exact), bare index", 1.0),
        *[
            (
                f"ef{ef}",
                f"FAISS HNSW M={HNSW_M} ef={ef}, bare index",
                recall_at_k(truth, found[f"ef{ef}"]),
            )
            for ef in HNSW_EF_SWEEP
        ],
    ]
    for key, label, recall in rows:
        p50, p99 = percentiles(times[key])
        note = f"recall@10 {recall:.3f} vs chroma {chroma_recall:.3f}"
        results.append(
            Result(f"search p50 @{n}: {label}", p50, "ms", len(qvecs), "chroma", c50, note=note)
        )
        results.append(
            Result(f"search p99 @{n}: {label}", p99, "ms", len(qvecs), "chroma", c99, note=note)
        )
    equal = [ef for ef in HNSW_EF_SWEEP if recall_at_k(truth, found[f"ef{ef}"]) >= chroma_recall]
    if equal:
        ef = equal[0]
        p50, _ = percentiles(times[f"ef{ef}"])
        results.append(
            Result(
                f"search p50 @{n} at equal recall: FAISS HNSW ef={ef}",
                p50,
                "ms",
                len(qvecs),
                "chroma",
                c50,
                note=f"recall@10 {recall_at_k(truth, found[f'ef{ef}']):.3f} >= "
                f"chroma {chroma_recall:.3f}; HNSW build {build:.1f}s",
            )
        )
    results.append(
        Result(
            f"recall@10 @{n}: chroma (its HNSW) vs exact",
            chroma_recall,
            "ratio",
            len(qvecs),
            note=f"HNSW build {build:.1f}s (FAISS, M={HNSW_M}, efC={HNSW_EF_CONSTRUCTION})",
        )
    )

    if n == min(_sizes()):
        bench_single_writes(store, root, chroma, embedder, fresh, results)
    store.close()


def bench_single_writes(
    store: DocumentStore,
    root: int,
    chroma: Chroma,
    embedder: OnnxMiniLM,
    texts: list[str],
    results: list[Result],
) -> None:
    """One durable write at a time, embedding included; then search until it is found."""
    fresh = texts  # held out of the corpus: never stored before
    ours, theirs = [], []
    for i, text in enumerate(fresh):
        start = time.perf_counter()
        doc = store.create(ADMIN, DocumentCreate(parent_id=root, content=text))
        qvec = store.embedder.embed([text])[0]
        flt = build_filter(store, ADMIN, SearchRequest(query="-"))
        found = [h.doc_id for h in nearest_documents(store, flt, qvec, 1)]
        ours.append(time.perf_counter() - start)
        if found != [doc.id]:
            raise RuntimeError(f"JMFTS: write {doc.id} not findable at ack")

        start = time.perf_counter()
        vec = embedder.embed([text])
        chroma.add([10_000_000 + i], vec, [text])
        while chroma.query(embedder.embed([text])[0])[0] != 10_000_000 + i:
            if time.perf_counter() - start > 30:
                raise RuntimeError("chroma: write not findable within 30 s")
        theirs.append(time.perf_counter() - start)
    o50, o99 = percentiles(ours)
    t50, t99 = percentiles(theirs)
    note = "embed + durable write + vector search that finds it"
    results.append(Result("write->findable p50", o50, "ms", len(ours), "chroma", t50, note=note))
    results.append(Result("write->findable p99", o99, "ms", len(ours), "chroma", t99, note=note))
    rate_ours = len(ours) / sum(ours)  # includes the findability check
    results.append(
        Result(
            "single writes with embedding + check",
            rate_ours,
            "docs/s",
            len(ours),
            "chroma",
            len(theirs) / sum(theirs),
            note=note,
        )
    )


def bench_synthetic(real: np.ndarray, qvecs: np.ndarray, results: list[Result]) -> None:
    """1M clustered synthetic vectors (real embeddings + noise): exact vs IVF."""
    console.rule(f"{SYNTHETIC} synthetic vectors")
    rng = np.random.default_rng(7)
    dim = real.shape[1]
    base = np.empty((SYNTHETIC, dim), dtype=np.float32)
    for at in range(0, SYNTHETIC, 100_000):
        rows = real[rng.integers(0, len(real), min(100_000, SYNTHETIC - at))]
        noisy = rows + 0.04 * rng.standard_normal(rows.shape).astype(np.float32)
        base[at : at + len(rows)] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    flat = VectorIndex(dim, "flat")
    flat_build, _ = timed(lambda: flat.add(np.arange(SYNTHETIC, dtype=np.int64), base))
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFFlat(quantizer, dim, IVF_LISTS, faiss.METRIC_INNER_PRODUCT)
    ivf_build, _ = timed(
        lambda: (ivf.train(base[rng.integers(0, SYNTHETIC, 60_000)]), ivf.add(base))
    )
    ivf.nprobe = IVF_PROBES
    truth, exact_times, found, approx_times = [], [], [], []
    for q in qvecs[:100]:
        t, (_, ids) = timed(lambda q=q: flat.search(q, K))
        exact_times.append(t)
        truth.append(ids.tolist())
        t, (_, ids2) = timed(lambda q=q: ivf.search(q.reshape(1, -1), K))
        approx_times.append(t)
        found.append(ids2[0].tolist())
    e50, e99 = percentiles(exact_times)
    a50, a99 = percentiles(approx_times)
    recall = recall_at_k(truth, found)
    note = f"IVF{IVF_LISTS} nprobe={IVF_PROBES}: recall@10 {recall:.3f}, build {ivf_build:.0f}s"
    results.append(
        Result(
            "search p50 @1M synthetic: FAISS flat (exact)",
            e50,
            "ms",
            100,
            note=f"add {flat_build:.0f}s",
        )
    )
    results.append(Result("search p99 @1M synthetic: FAISS flat (exact)", e99, "ms", 100))
    results.append(
        Result(
            "search p50 @1M synthetic: FAISS IVF (approx)",
            a50,
            "ms",
            100,
            "FAISS flat",
            e50,
            note=note,
        )
    )
    results.append(
        Result(
            "search p99 @1M synthetic: FAISS IVF (approx)",
            a99,
            "ms",
            100,
            "FAISS flat",
            e99,
            note=note,
        )
    )
    results.append(
        Result(
            "recall@10 @1M synthetic: FAISS IVF",
            recall,
            "ratio",
            100,
            note="chroma not run at 1M (build time)",
        )
    )


def prepare(embedder: OnnxMiniLM) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    """The corpus, its (cached) vectors, the queries and the held-out fresh writes."""
    largest = max(_sizes())
    texts = load_corpus(largest + QUERIES + SINGLE_WRITES)
    queries = [" ".join(t.split()[:8]) for t in texts[largest : largest + QUERIES]]
    fresh = texts[largest + QUERIES :]
    texts = texts[:largest]
    return texts, embed_cached(embedder, texts, "corpus"), queries, fresh


def main() -> None:
    """Run every measurement and publish ``bench-results/jmfts.json``."""
    faiss.omp_set_num_threads(JmftsConfig(data_dir=Path()).faiss_threads)  # as the server runs
    sizes = _sizes()
    embedder = OnnxMiniLM(batch_size=128)
    results: list[Result] = []
    corpus_embedder = embedder
    if os.environ.get("JMFTS_BENCH_CORPUS", "fp32") == "int8":
        corpus_embedder = OnnxMiniLM(batch_size=128, quantized=True)
    texts, vecs, queries, fresh = prepare(corpus_embedder)

    sample = texts[:2000]
    seconds, _ = timed(lambda: embedder.embed(sample))
    results.append(
        Result(
            "embed throughput (batch 128, fp32 ONNX)",
            len(sample) / seconds,
            "docs/s",
            len(sample),
            note="all-MiniLM-L6-v2 on onnxruntime, 2 cores",
        )
    )

    bench_writes(embedder, results)
    bench_conversation(embedder, results)
    qvecs = corpus_embedder.embed(queries)
    work = Path(tempfile.mkdtemp(prefix="jmfts-bench-"))
    try:
        for n in sizes:
            bench_size(n, texts, vecs, qvecs, corpus_embedder, work, results, fresh)
            shutil.rmtree(work / f"chroma-{n}", ignore_errors=True)
            shutil.rmtree(work / f"jmfts-{n}", ignore_errors=True)
        if os.environ.get("JMFTS_BENCH_SYNTHETIC", "1") != "0":
            bench_synthetic(vecs, qvecs, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = publish("jmfts", results)
    console.print(f"wrote {out}")
