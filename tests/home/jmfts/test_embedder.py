"""The ONNX embedder against sentence-transformers' own output, and the chunker."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from home.jmfts.chunking import chunk_spans
from home.jmfts.embedder import (
    INT8_FILE,
    INT8_SUFFIX,
    MANIFEST_FILE,
    MINILM_DIMENSION,
    ONNX_FILE,
    REFERENCE_FILE,
    OnnxMiniLM,
)
from home.jmfts.errors import EmbedderError, StoreMismatch
from home.jmfts.onnx_export import REFERENCE_SENTENCES
from home.jmfts.store import DocumentStore


def test_onnx_matches_sentence_transformers(onnx_cache: Path, embedder: OnnxMiniLM) -> None:
    # reference.npy was computed by the package's own PyTorch loading (SentenceTransformer)
    # in the same setup step that exported the graph.
    reference = np.load(onnx_cache / REFERENCE_FILE)
    ours = embedder.embed(list(REFERENCE_SENTENCES))
    assert ours.shape == reference.shape == (len(REFERENCE_SENTENCES), MINILM_DIMENSION)
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() >= 0.999, dict(zip(REFERENCE_SENTENCES, cosines.tolist(), strict=True))


def test_int8_graph_stays_close_to_sentence_transformers(onnx_cache: Path) -> None:
    # The int8 graph is a speed option, not a new model: it must still rank like it.
    quantized = OnnxMiniLM(onnx_cache, quantized=True)
    reference = np.load(onnx_cache / REFERENCE_FILE)
    cosines = (quantized.embed(list(REFERENCE_SENTENCES)) * reference).sum(axis=1)
    assert cosines.min() >= 0.97, dict(zip(REFERENCE_SENTENCES, cosines.tolist(), strict=True))
    assert quantized.model_name.endswith(INT8_SUFFIX)


def test_a_store_refuses_the_other_precision(
    onnx_cache: Path, embedder: OnnxMiniLM, tmp_path: Path
) -> None:
    DocumentStore(tmp_path, embedder).close()
    with pytest.raises(StoreMismatch, match=INT8_SUFFIX.replace("+", "[+]")):
        DocumentStore(tmp_path, OnnxMiniLM(onnx_cache, quantized=True))


def test_missing_int8_graph_names_the_setup_command(onnx_cache: Path, tmp_path: Path) -> None:
    (tmp_path / ONNX_FILE).write_bytes((onnx_cache / ONNX_FILE).read_bytes())
    raw = json.loads((onnx_cache / MANIFEST_FILE).read_text())
    raw.pop("int8_sha256", None)
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(raw))
    assert not (tmp_path / INT8_FILE).exists()
    with pytest.raises(EmbedderError, match="home jmfts setup"):
        OnnxMiniLM(tmp_path, quantized=True)
    OnnxMiniLM(tmp_path)  # the fp32 graph alone still loads


def test_batching_and_order_do_not_change_vectors(embedder: OnnxMiniLM) -> None:
    texts = [f"note {i}: " + "word " * (i % 17) for i in range(70)]
    one_by_one = np.vstack([embedder.embed([t]) for t in texts[:5]])
    batched = embedder.embed(texts)
    assert np.allclose(batched[:5], one_by_one, atol=1e-5)
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_checksum_mismatch_is_refused(onnx_cache: Path, tmp_path: Path) -> None:
    copy = tmp_path / "cache"
    copy.mkdir()
    (copy / ONNX_FILE).write_bytes((onnx_cache / ONNX_FILE).read_bytes()[:-16] + b"x" * 16)
    (copy / MANIFEST_FILE).write_text((onnx_cache / MANIFEST_FILE).read_text())
    with pytest.raises(EmbedderError, match="sha256"):
        OnnxMiniLM(copy)


def test_missing_manifest_names_the_setup_command(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="home jmfts setup"):
        OnnxMiniLM(tmp_path)


def test_manifest_with_missing_key_names_it(onnx_cache: Path, tmp_path: Path) -> None:
    raw = json.loads((onnx_cache / MANIFEST_FILE).read_text())
    del raw["dimension"]
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(raw))
    with pytest.raises(EmbedderError, match="dimension"):
        OnnxMiniLM(tmp_path)


def test_chunk_spans_cover_long_text_with_overlap() -> None:
    text = " ".join(f"w{i}" for i in range(1000))
    offsets = []
    pos = 0
    for word in text.split(" "):
        offsets.append((pos, pos + len(word)))
        pos += len(word) + 1
    spans = chunk_spans(text, offsets, window=100, overlap=10)
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    for (_, end_a), (start_b, _) in itertools.pairwise(spans):
        assert start_b < end_a  # overlapping windows
    assert chunk_spans("short", [(0, 5)]) == [(0, 5)]
    with pytest.raises(ValueError, match="overlap"):
        chunk_spans(text, offsets, window=10, overlap=10)
