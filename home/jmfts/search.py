"""Vector (cosine), full-text (BM25) and hybrid (a blend of both scores, over a turn and
the turns around it) search.

Every method applies the same filters in SQL — the principal's scope, subtree roots,
usetypes (``entity``/``summary`` excluded unless asked), a time range and ``as_of`` — so a
document the principal was not granted can never appear, nor be counted.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import numpy as np

from home.jmfts.access import Principal
from home.jmfts.clock import age_in_words, from_stored, to_stored, utc_now
from home.jmfts.db import subtree_range
from home.jmfts.errors import InvalidInput, NotFound
from home.jmfts.models import (
    DEFAULT_EXCLUDED_USETYPES,
    AppliedFilters,
    HybridSearchRequest,
    ScoreKind,
    SearchRequest,
    SearchResponse,
    SearchResultItem,
)
from home.jmfts.recency import Recency
from home.jmfts.rows import document_response, embed_text, usetype_clause
from home.jmfts.store import DocumentStore

#: Hybrid search scores each document by a blend of what matches it and what matches the
#: turns next to it (a conversation's answer is often a turn or two from the words the
#: question uses). Per document: cosine + VECTOR_NEIGHBOUR_SHARE x the cosines of its
#: neighbours, plus TEXT_WEIGHT x (BM25 as a share of the best BM25 + TEXT_NEIGHBOUR_SHARE
#: x its neighbours'), plus TEXT_RANK_BONUS / its full-text rank; a share applies once
#: per turn of distance (squared two turns away). Chosen on the tuning split of
#: tests/bench/memory_retrieval.py (five LoCoMo conversations, 2,760 turns stored as τ
#: stores them, 760 questions): recall@1/@5/@10 of the evidence turn 0.36/0.67/0.77,
#: against 0.17/0.39/0.48 for the reciprocal rank fusion before (k 10, vector 2 : text 1,
#: two following turns at 0.6) and 0.35/0.57/0.65 for full text alone. Scores, not ranks:
#: a cosine barely above the next one must not outweigh a decisive BM25 match; the rank
#: bonus keeps full text's clear first hit first. The generated corpus of
#: tests/bench/jmfts_conversation.py, whose answers sit exactly two turns after the topic
#: turn, preferred the old forward-only spread (recall@10 0.75 there, 0.40 with this).
VECTOR_NEIGHBOUR_SHARE = 0.5
TEXT_WEIGHT = 0.8
TEXT_NEIGHBOUR_SHARE = 0.4
TEXT_RANK_BONUS = 0.6
DEFAULT_WEIGHTS = {"vector": 1.0, "fulltext": 1.0}
#: Documents asked of each method before blending (at least; more for a larger limit).
HYBRID_DEPTH = 50
SNIPPET_CHARS = 240
#: Chunks asked of the index per document wanted, at least MIN_CANDIDATES: a document
#: may have several chunks and a filter drops some; too few found and the search asks
#: 4x more. Every candidate costs a row read: at 100k documents 2x/20 against 4x/40 took
#: a vector search from 1.26 to 1.04 ms p50 (HNSW ef 128).
OVERSAMPLE = 2
MIN_CANDIDATES = 20
#: Words too common to rank by: OR-ed into a BM25 query they match most turns of a
#: conversation and crowd out the one that names the topic.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
_WORD = re.compile(r"\w+", re.UNICODE)
_FUSABLE = {"vector": "vector", "fulltext": "fulltext", "bm25": "fulltext"}


@dataclass
class Filter:
    """The SQL predicate a search runs under (over ``documents d``)."""

    where: str
    params: list[Any] = field(default_factory=list)
    restrictive: bool = False


def build_filter(store: DocumentStore, principal: Principal, request: SearchRequest) -> Filter:
    """Translate a request's filters (and the principal's scope) into SQL."""
    if request.project is not None:
        raise InvalidInput("project: projections are not supported by this appliance")
    scope = store.scope(principal)
    clause, params = scope.sql()
    # A workspace record that a later record supersedes is history, not current memory;
    # as of a time, only a supersession recorded by then counts (bitemporal, like triples).
    superseded = "SELECT 1 FROM documents s WHERE s.supersedes = d.id"
    args = list(params)
    if request.as_of is not None:
        superseded += " AND s.created_at <= ?"
        args.append(to_stored(request.as_of))
    parts = [clause, f"NOT EXISTS ({superseded})"]
    restrictive = scope.read_paths is not None
    roots = list(request.roots or [])
    if request.parent_id is not None:
        roots.append(request.parent_id)
    if roots:
        ranges = []
        for root_id in roots:
            root = store.visible(principal, root_id)
            lo, hi = subtree_range(root["path"])
            ranges.append("(d.path >= ? AND d.path < ?)")
            args += [lo, hi]
        parts.append("(" + " OR ".join(ranges) + ")")
        restrictive = True
    exclude = (
        list(DEFAULT_EXCLUDED_USETYPES) if request.exclude_types is None else request.exclude_types
    )
    use_clause, use_params = usetype_clause("d.usetype", request.usetype, exclude)
    parts.append(use_clause)
    args += use_params
    restrictive = restrictive or request.usetype is not None
    clock = "COALESCE(d.event_time, d.created_at)"
    for bound, op in ((request.created_after, ">="), (request.created_before, "<")):
        if bound is not None:
            parts.append(f"{clock} {op} ?")
            args.append(to_stored(bound))
            restrictive = True
    if request.as_of is not None:
        parts.append(f"{clock} <= ?")
        args.append(to_stored(request.as_of))
        restrictive = True
    return Filter(" AND ".join(parts), args, restrictive)


@dataclass
class Hit:
    """A scored document before it is rendered."""

    doc_id: int
    score: float
    chunk_span: tuple[int, int] | None = None
    snippet: str | None = None
    found_by: list[str] = field(default_factory=list)


def vector_hits(
    store: DocumentStore,
    flt: Filter,
    query: str,
    limit: int,
    threshold: float = 0.0,
    *,
    exact: bool = False,
) -> list[Hit]:
    """Top documents by cosine similarity of their best chunk to the query."""
    qvec = store.embedder.embed([query])[0]
    return nearest_documents(store, flt, qvec, limit, threshold, exact=exact)


def nearest_documents(
    store: DocumentStore,
    flt: Filter,
    qvec: np.ndarray,
    limit: int,
    threshold: float = 0.0,
    *,
    exact: bool = False,
) -> list[Hit]:
    """Top documents for an already embedded query vector (unit length); ``exact`` scans
    every vector instead of walking the HNSW graph."""
    with store.lock:
        total = store.index.count
        only = None
        if flt.restrictive:
            rows = store.conn.execute(
                f"SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
                f" WHERE {flt.where}",
                flt.params,
            ).fetchall()
            only = np.array([r[0] for r in rows], dtype=np.int64)
            if len(only) * 2 > total:
                only = None  # a wide filter: oversampling is cheaper than a selector
        k = max(limit * OVERSAMPLE, MIN_CANDIDATES)
        while True:
            scores, ids = store.index.search(qvec, k, only=only, exact=exact)
            best: dict[int, Hit] = {}
            if len(ids):
                marks = ",".join("?" * len(ids))
                rows = store.conn.execute(
                    f"SELECT c.id, c.document_id, c.char_start, c.char_end FROM chunks c"
                    f" JOIN documents d ON d.id = c.document_id"
                    f" WHERE c.id IN ({marks}) AND {flt.where}",
                    [*ids.tolist(), *flt.params],
                ).fetchall()
                chunk = {r[0]: (r[1], r[2], r[3]) for r in rows}
                for score, cid in zip(scores.tolist(), ids.tolist(), strict=True):
                    if cid not in chunk or score < threshold:
                        continue
                    doc_id, start, end = chunk[cid]
                    if doc_id not in best or best[doc_id].score < score:
                        best[doc_id] = Hit(doc_id, float(score), (start, end))
            exhausted = len(ids) < k or k >= total
            if len(best) >= limit or exhausted:
                break
            k *= 4
    return sorted(best.values(), key=lambda h: -h.score)[:limit]


def fts_query(text: str, *, drop_stopwords: bool = True) -> str | None:
    """A safe FTS5 query: every word quoted, OR-ed (BM25 ranks docs matching more);
    stopwords left out unless the query has nothing else."""
    words = _WORD.findall(text)
    if drop_stopwords:
        words = [w for w in words if w.lower() not in STOPWORDS] or words
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', "") + '"' for w in words[:64])


def fulltext_hits(
    store: DocumentStore, flt: Filter, query: str, limit: int, *, drop_stopwords: bool = True
) -> list[Hit]:
    """Top documents by SQLite FTS5 BM25."""
    match = fts_query(query, drop_stopwords=drop_stopwords)
    if match is None:
        return []
    with store.lock:
        rows = store.conn.execute(
            "SELECT f.rowid, bm25(documents_fts) AS rank,"
            " snippet(documents_fts, 1, '', '', ' … ', 24) AS snip"
            " FROM documents_fts f JOIN documents d ON d.id = f.rowid"
            f" WHERE documents_fts MATCH ? AND {flt.where} ORDER BY rank LIMIT ?",
            [match, *flt.params, limit],
        ).fetchall()
    return [Hit(r[0], -float(r[1]), snippet=r[2] or None) for r in rows]


@dataclass(frozen=True)
class Neighbours:
    """The turns on either side of a document in its conversation (``None`` at an end)."""

    before: int | None
    after: int | None


def conversation_neighbours(
    store: DocumentStore, flt: Filter, doc_ids: list[int]
) -> dict[int, Neighbours]:
    """Each document's previous and next turn, within the filter.

    Both ways a conversation is stored count: turns as siblings under a session (the turn
    before is the previous sibling) and τ's chain, each entry filed under the one before
    (the turn before is the parent, when the parent holds text: a session or conversation
    root does not). The turn after is the first later document that is a child or a later
    sibling."""
    if not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    query = (
        "SELECT c.id,"
        " COALESCE("
        f"  (SELECT d.id FROM documents d WHERE d.parent_id = c.parent_id AND d.id < c.id"
        f"   AND {flt.where} ORDER BY d.id DESC LIMIT 1),"
        f"  (SELECT d.id FROM documents d WHERE d.id = c.parent_id AND d.content <> ''"
        f"   AND {flt.where})),"
        f" (SELECT d.id FROM documents d WHERE d.parent_id = c.id AND {flt.where}"
        "   ORDER BY d.id LIMIT 1),"
        f" (SELECT d.id FROM documents d WHERE d.parent_id = c.parent_id AND d.id > c.id"
        f"   AND {flt.where} ORDER BY d.id LIMIT 1)"
        f" FROM documents c WHERE c.id IN ({marks})"
    )
    params = [*flt.params, *flt.params, *flt.params, *flt.params, *doc_ids]
    with store.lock:
        rows = store.conn.execute(query, params).fetchall()
    out = {}
    for doc_id, before, child, sibling in rows:
        after = min((x for x in (child, sibling) if x is not None), default=None)
        out[doc_id] = Neighbours(before, after)
    return out


def cosines(store: DocumentStore, qvec: np.ndarray, doc_ids: list[int]) -> dict[int, float]:
    """Each document's best chunk cosine to the query vector (unit rows, so a dot)."""
    if not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    with store.lock:
        rows = store.conn.execute(
            f"SELECT document_id, vector FROM chunks WHERE document_id IN ({marks})", doc_ids
        ).fetchall()
    if not rows:
        return {}
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
    scores = matrix.reshape(len(rows), -1) @ qvec
    best: dict[int, float] = {}
    for (doc_id, _), score in zip(rows, scores.tolist(), strict=True):
        best[doc_id] = max(best.get(doc_id, -1.0), score)
    return best


def conversation_runs(
    store: DocumentStore, flt: Filter, doc_ids: list[int], turns: int
) -> list[list[int]]:
    """For each document, the run of turns around it in conversation order: up to
    ``turns`` before it, itself, up to ``turns`` after it (one neighbour query per step)."""
    runs = {doc_id: [doc_id] for doc_id in doc_ids}
    # Each run's current first and last turn; None once the conversation ends that side.
    ends: dict[int, tuple[int | None, int | None]] = {d: (d, d) for d in doc_ids}
    for _ in range(turns):
        asked = sorted({end for pair in ends.values() for end in pair if end is not None})
        if not asked:
            break
        links = conversation_neighbours(store, flt, asked)
        for origin, (first, last) in ends.items():
            before = links[first].before if first is not None and first in links else None
            after = links[last].after if last is not None and last in links else None
            if before is not None:
                runs[origin].insert(0, before)
            if after is not None:
                runs[origin].append(after)
            ends[origin] = (before, after)
    return list(runs.values())


def blend(
    store: DocumentStore,
    flt: Filter,
    qvec: np.ndarray | None,
    ranked: dict[str, list[Hit]],
    *,
    weights: dict[str, float],
    turns: int,
) -> list[Hit]:
    """Hybrid scores (see :data:`VECTOR_NEIGHBOUR_SHARE`) for every document a method
    found and the ``turns`` turns on either side of each, best first."""
    found: dict[int, Hit] = {}
    for method, hits in ranked.items():
        for hit in hits:
            merged = found.setdefault(hit.doc_id, Hit(hit.doc_id, 0.0))
            merged.chunk_span = merged.chunk_span or hit.chunk_span
            merged.snippet = merged.snippet or hit.snippet
            merged.found_by.append(method)
    near: dict[int, dict[int, int]] = {doc_id: {} for doc_id in found}  # doc: {other: turns}
    for run in conversation_runs(store, flt, list(found), turns):
        for i, doc_id in enumerate(run):
            for j in range(i + 1, min(len(run), i + turns + 1)):
                for a, b in ((doc_id, run[j]), (run[j], doc_id)):
                    known = near.setdefault(a, {})
                    known[b] = min(known.get(b, j - i), j - i)
    everyone = sorted(near)
    cosine = cosines(store, qvec, everyone) if qvec is not None else {}
    text = ranked.get("fulltext", [])
    best_bm25 = max((h.score for h in text), default=0.0)
    bm25 = {h.doc_id: h.score / best_bm25 for h in text} if best_bm25 > 0 else {}
    rank = {h.doc_id: r for r, h in enumerate(text, start=1)}
    w_vector, w_text = weights.get("vector", 0.0), weights.get("fulltext", 0.0)
    scored = []
    for doc_id in everyone:
        others = near[doc_id].items()
        vector_part = cosine.get(doc_id, 0.0) + sum(
            VECTOR_NEIGHBOUR_SHARE**d * cosine.get(n, 0.0) for n, d in others
        )
        text_part = TEXT_WEIGHT * (
            bm25.get(doc_id, 0.0)
            + sum(TEXT_NEIGHBOUR_SHARE**d * bm25.get(n, 0.0) for n, d in others)
        )
        if doc_id in rank:
            text_part += TEXT_RANK_BONUS / rank[doc_id]
        hit = found.get(doc_id) or Hit(doc_id, 0.0, found_by=["context"])
        hit.score = w_vector * vector_part + w_text * text_part
        scored.append(hit)
    return sorted(scored, key=lambda h: -h.score)


_SENTENCE = re.compile(r"(?<=[.!?\n])\s+")


def best_passage(text: str, query: str, size: int = SNIPPET_CHARS) -> str:
    """The sentence run of ``text`` (at most ``size`` chars) sharing most query words."""
    if len(text) <= size:
        return text
    stems = {w.lower()[:5] for w in _WORD.findall(query)}
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    best, best_score = 0, -1
    for i, sentence in enumerate(sentences):
        score = sum(1 for w in _WORD.findall(sentence) if w.lower()[:5] in stems)
        if score > best_score:
            best, best_score = i, score
    passage = sentences[best]
    for extra in sentences[best + 1 :]:
        if len(passage) + 1 + len(extra) > size:
            break
        passage += " " + extra
    return passage if len(passage) <= size else passage[: size - 1].rstrip() + "…"


def _render(
    store: DocumentStore, hits: list[Hit], method: str, query: str
) -> list[SearchResultItem]:
    if not hits:
        return []
    marks = ",".join("?" * len(hits))
    with store.lock:
        rows: dict[int, sqlite3.Row] = {
            r["id"]: r
            for r in store.conn.execute(
                f"SELECT * FROM documents WHERE id IN ({marks})", [h.doc_id for h in hits]
            )
        }
    paths = store.titled_paths(list(rows.values()))
    items = []
    for hit in hits:
        row = rows.get(hit.doc_id)
        if row is None:  # deleted between ranking and rendering
            continue
        text = embed_text(row["title"], row["content"])
        snippet = hit.snippet
        if snippet is None:
            start, end = hit.chunk_span or (0, len(text))
            snippet = best_passage(text[start:end], query)
        if len(snippet) > SNIPPET_CHARS:
            snippet = snippet[: SNIPPET_CHARS - 1].rstrip() + "…"
        created = from_stored(row["event_time"] or row["created_at"])
        items.append(
            SearchResultItem(
                document=document_response(row),
                score=hit.score,
                method=method,
                id=row["id"],
                path=paths.get(row["id"], ""),
                title=row["title"],
                snippet=snippet,
                usetype=row["usetype"],
                created_at=from_stored(row["created_at"]),
                age=age_in_words(created) if created else "unknown",
                found_by=hit.found_by or [_FUSABLE.get(method, method)],
            )
        )
    return items


def _applied(request: SearchRequest, **extra: Any) -> AppliedFilters:
    excluded = (
        []
        if request.usetype is not None
        else list(
            DEFAULT_EXCLUDED_USETYPES if request.exclude_types is None else request.exclude_types
        )
    )
    return AppliedFilters(
        exclude_types=excluded,
        usetype=request.usetype,
        parent_id=request.parent_id,
        roots=request.roots,
        limit=request.limit,
        as_of=request.as_of,
        **extra,
    )


def search(
    store: DocumentStore, principal: Principal, method: str, request: SearchRequest
) -> SearchResponse:
    """Run one search method for ``principal``."""
    started = time.perf_counter()
    flt = build_filter(store, principal, request)
    kind: ScoreKind
    if method == "vector":
        hits = vector_hits(
            store, flt, request.query, request.limit, request.threshold, exact=request.exact
        )
        kind, applied = "cosine", _applied(request, threshold=request.threshold)
    elif method in ("fulltext", "bm25"):
        hits = fulltext_hits(store, flt, request.query, request.limit)
        kind, applied = "bm25", _applied(request)
    elif method == "hybrid":
        hits, applied = _hybrid(store, flt, request)
        kind = "fused_score"
    else:
        raise NotFound(f"unknown search method {method!r}")
    items = _render(store, hits, method, request.query)
    return SearchResponse(
        results=items,
        total=len(items),
        latency_ms=(time.perf_counter() - started) * 1000,
        score_kind=kind,
        applied=applied,
    )


def _hybrid(
    store: DocumentStore, flt: Filter, request: SearchRequest
) -> tuple[list[Hit], AppliedFilters]:
    methods = ["vector", "fulltext"]
    weights: dict[str, float] = {}
    if isinstance(request, HybridSearchRequest):
        if request.methods is not None:
            unknown = [m for m in request.methods if m not in _FUSABLE]
            if unknown or not request.methods:
                raise InvalidInput(
                    f"methods: {unknown or 'empty'} not supported; use vector, fulltext, bm25"
                )
            methods = list(dict.fromkeys(_FUSABLE[m] for m in request.methods))
        unweighable = [k for k in (request.weights or {}) if k not in _FUSABLE]
        if unweighable:
            raise InvalidInput(
                f"weights: {unweighable} not supported; weigh vector, fulltext or bm25"
            )
        weights = {_FUSABLE[k]: v for k, v in (request.weights or {}).items()}
    depth = max(request.limit * 5, HYBRID_DEPTH)
    ranked: dict[str, list[Hit]] = {}
    qvec = store.embedder.embed([request.query])[0] if "vector" in methods else None
    if qvec is not None:
        ranked["vector"] = nearest_documents(store, flt, qvec, depth, exact=request.exact)
    if "fulltext" in methods:
        ranked["fulltext"] = fulltext_hits(store, flt, request.query, depth)
    resolved = {m: weights.get(m, DEFAULT_WEIGHTS[m]) for m in methods}
    turns = request.context_turns if isinstance(request, HybridSearchRequest) else 0
    hits = blend(store, flt, qvec, ranked, weights=resolved, turns=turns)
    recency = None
    if isinstance(request, HybridSearchRequest) and request.recency_weight > 0:
        now = request.now or utc_now()
        recency = Recency(
            request.recency_weight,
            request.recency_halflife_days,
            now if now.tzinfo is not None else now.replace(tzinfo=UTC),  # naive: UTC
        )
        hits = recency.weigh(store, hits)
    return hits[: request.limit], _applied(
        request,
        methods=methods,
        weights=resolved,
        context_turns=turns,
        recency=recency.applied() if recency is not None else None,
    )
