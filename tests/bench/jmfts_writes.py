"""Single-document writes the way agents make them: one ``POST /documents`` per record,
each waiting for its ack (findable when it returns), from one client and from eight at
once — against Chroma's ``add()`` of one document at a time, embedding included with the
same embedder, in the same run. JMFTS runs as its real server subprocess; Chroma
in-process (its usual mode).

Three server settings: the default (fp32 embedder, ``synchronous=FULL``), the int8
embedder, and the int8 embedder with ``synchronous=NORMAL`` (acked writes survive kill -9
but not power loss).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import chromadb
import numpy as np

from home.jmfts.embedder import OnnxMiniLM
from tests.bench.report import Result
from tests.home.jmfts.conftest import start_server

WRITERS = 8
JOIN_TIMEOUT_S = 600.0


def _texts(n: int, tag: str) -> list[str]:
    return [f"{tag} note {i}: my sister moved to Lisbon and starts on day {i}." for i in range(n)]


def _run_clients(
    clients: int, per_client: int, write: Callable[[int, int], None]
) -> tuple[float, list[float]]:
    """(wall seconds, per-write latencies) for ``clients`` threads writing in a loop."""
    latencies: list[float] = []
    lock = threading.Lock()
    gate = threading.Barrier(clients + 1)

    def client(worker: int) -> None:
        gate.wait(JOIN_TIMEOUT_S)
        own = []
        for i in range(per_client):
            start = time.perf_counter()
            write(worker, i)
            own.append(time.perf_counter() - start)
        with lock:
            latencies.extend(own)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(clients)]
    for thread in threads:
        thread.start()
    gate.wait(JOIN_TIMEOUT_S)
    started = time.perf_counter()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    return time.perf_counter() - started, latencies


@dataclass(frozen=True)
class Setting:
    """One server configuration the write rows are measured with."""

    label: str
    embedder: str
    synchronous: str

    @property
    def quantized(self) -> bool:
        return self.embedder.endswith("-int8")


SETTINGS = (
    Setting("default: fp32, FULL", "minilm-onnx", "FULL"),
    Setting("int8, FULL", "minilm-onnx-int8", "FULL"),
    Setting("int8, NORMAL", "minilm-onnx-int8", "NORMAL"),
)


def _jmfts(
    clients: int, per_client: int, work: Path, setting: Setting
) -> tuple[float, list[float]]:
    server = start_server(
        work / f"jmfts-writes-{clients}-{setting.embedder}-{setting.synchronous}",
        "--embedder",
        setting.embedder,
        "--synchronous",
        setting.synchronous,
    )
    try:
        with server.client() as admin:
            root = admin.post("/documents", json={"title": "writes"}).json()["id"]
        sessions = [server.client() for _ in range(clients)]

        def write(worker: int, i: int) -> None:
            text = _texts(1, f"w{worker}-{i}")[0]
            response = sessions[worker].post(
                "/documents", json={"parent_id": root, "content": text}
            )
            response.raise_for_status()

        try:
            return _run_clients(clients, per_client, write)
        finally:
            for session in sessions:
                session.close()
    finally:
        server.stop()


def _chroma(
    clients: int, per_client: int, work: Path, embedder: OnnxMiniLM
) -> tuple[float, list[float]]:
    client = chromadb.PersistentClient(
        path=str(work / f"chroma-writes-{clients}-{embedder.model_name.replace('/', '_')}"),
        settings=chromadb.Settings(anonymized_telemetry=False),
    )
    collection = client.create_collection(
        "writes", metadata={"hnsw:space": "cosine"}, embedding_function=None
    )

    def write(worker: int, i: int) -> None:
        text = _texts(1, f"w{worker}-{i}")[0]
        collection.add(ids=[f"{worker}-{i}"], embeddings=embedder.embed([text]), documents=[text])

    return _run_clients(clients, per_client, write)


def bench_writes(
    embedder: OnnxMiniLM,
    results: list[Result],
    total: int = 240,
    quantized: OnnxMiniLM | None = None,
) -> None:
    """Sequential and eight-writer rows for every :data:`SETTINGS`: docs/s and p50/p99
    latency to ack, each beside Chroma with the same embedder."""
    quantized = quantized or OnnxMiniLM(quantized=True)
    with tempfile.TemporaryDirectory(prefix="jmfts-writes-") as tmp:
        work = Path(tmp)
        for clients in (1, WRITERS):
            per_client = total // clients
            peers = {
                False: _chroma(clients, per_client, work, embedder),
                True: _chroma(clients, per_client, work, quantized),
            }
            for setting in SETTINGS:
                ours_s, ours = _jmfts(clients, per_client, work, setting)
                theirs_s, theirs = peers[setting.quantized]
                _rows(
                    results,
                    clients,
                    clients * per_client,
                    setting,
                    (ours_s, ours),
                    (theirs_s, theirs),
                )


def _rows(
    results: list[Result],
    clients: int,
    n: int,
    setting: Setting,
    ours: tuple[float, list[float]],
    theirs: tuple[float, list[float]],
) -> None:
    who = "1 client" if clients == 1 else f"{clients} clients"
    label = f"{who}, {setting.label}"
    precision = "int8" if setting.quantized else "fp32"
    note = (
        "POST /documents, embedded + durable + findable at ack;"
        f" chroma add() + the same {precision} embed"
    )
    results.append(
        Result(
            f"single writes docs/s, {label}",
            n / ours[0],
            "docs/s",
            n,
            "chroma",
            n / theirs[0],
            note=note,
        )
    )
    for pct in (50, 99):
        results.append(
            Result(
                f"single write p{pct} to ack, {label}",
                float(np.percentile(ours[1], pct)) * 1000,
                "ms",
                n,
                "chroma",
                float(np.percentile(theirs[1], pct)) * 1000,
            )
        )
