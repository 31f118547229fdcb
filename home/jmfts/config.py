"""JMFTS configuration (data, not code): where it keeps state, where it listens, which
embedder it uses. The CLI and ``home up`` build one of these; nothing else reads env vars."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from home.jmfts.db import Synchronous
from home.jmfts.embedder import Embedder, OnnxMiniLM
from home.jmfts.errors import InvalidInput
from home.jmfts.models import DEFAULT_HOST, DEFAULT_PORT
from home.jmfts.vector_index import IndexKind


@dataclass(frozen=True)
class JmftsConfig:
    """Everything a JMFTS server needs to start."""

    data_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    embedder: str = "minilm-onnx"
    onnx_cache: Path | None = None
    index_kind: IndexKind = "hnsw"
    #: Seconds between saves of a changed FAISS index (a stale one is rebuilt at start).
    save_interval_s: float = 30.0
    #: OpenMP threads FAISS may use per search. One: requests already run in parallel on
    #: the server's threads, and on a busy 2-core box waking a second OpenMP thread per
    #: query costs a scheduler slice (measured: 100k flat p50 26 ms with 1, 107 ms with 2).
    faiss_threads: int = 1
    #: FULL: an acked write survives power loss too (one fsync per commit, ~7 ms on the
    #: bench machine); NORMAL: it survives kill -9 but not power loss (~0.3 ms).
    synchronous: Synchronous = "FULL"


EMBEDDERS: dict[str, Callable[[JmftsConfig], Embedder]] = {
    "minilm-onnx": lambda config: OnnxMiniLM(config.onnx_cache),
    "minilm-onnx-int8": lambda config: OnnxMiniLM(config.onnx_cache, quantized=True),
}


def build_embedder(config: JmftsConfig) -> Embedder:
    """The embedder the configuration names."""
    try:
        factory = EMBEDDERS[config.embedder]
    except KeyError as exc:
        raise InvalidInput(
            f"embedder {config.embedder!r} is unknown; expected one of {sorted(EMBEDDERS)}"
        ) from exc
    return factory(config)
