"""A document's text, chunked and embedded: the slow half of every write, done before
the store takes its lock (see :mod:`home.jmfts.store`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from home.jmfts.chunking import chunk_spans
from home.jmfts.embedder import Embedder, Vectors
from home.jmfts.rows import embed_text


@dataclass(frozen=True)
class Embedded:
    """A document's chunks, embedded before any lock is taken."""

    spans: list[tuple[int, int]]
    vectors: Vectors


def embed_document(embedder: Embedder, title: str | None, content: str | None) -> Embedded:
    """Chunk and embed one document's text."""
    text = embed_text(title, content)
    if not text.strip():
        return Embedded([], np.zeros((0, embedder.dimension), dtype=np.float32))
    spans = chunk_spans(text, embedder.token_offsets(text))
    return Embedded(spans, embedder.embed([text[a:b] for a, b in spans]))


def embed_documents(
    embedder: Embedder, texts: list[tuple[str | None, str | None]]
) -> list[Embedded]:
    """Chunk and embed many documents' ``(title, content)`` with one embedder call."""
    spans: list[list[tuple[int, int]]] = []
    pieces: list[str] = []
    for title, content in texts:
        text = embed_text(title, content)
        doc_spans = chunk_spans(text, embedder.token_offsets(text)) if text.strip() else []
        spans.append(doc_spans)
        pieces += [text[a:b] for a, b in doc_spans]
    vectors = embedder.embed(pieces)
    out, at = [], 0
    for doc_spans in spans:
        out.append(Embedded(doc_spans, vectors[at : at + len(doc_spans)]))
        at += len(doc_spans)
    return out
