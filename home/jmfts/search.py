"""Vector (cosine), full-text (BM25) and hybrid (reciprocal rank fusion) search.

Every method applies the same filters in SQL — the principal's scope, subtree roots,
usetypes (``entity``/``summary`` excluded unless asked), a time range and ``as_of`` — so a
document the principal was not granted can never appear, nor be counted.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from home.jmfts.access import Principal
from home.jmfts.clock import age_in_words, from_stored, to_stored
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
from home.jmfts.rows import document_response, embed_text, usetype_clause
from home.jmfts.store import DocumentStore

#: Reciprocal rank fusion constant and default weights, tuned on the conversational
#: corpus of tests/bench/jmfts_conversation.py (k 60 and 1:1 found the evidence turn in
#: the top 10 for 43 % of its questions; k 10, vector 2 : full text 1 and the following
#: turns below, for 73 %). A small k lets the top of each list decide.
RRF_K = 10
DEFAULT_WEIGHTS = {"vector": 2.0, "fulltext": 1.0}
#: Following turns (later siblings, in creation order) that share a hit's fused score in
#: hybrid search: in a conversation the turn that names the topic ("My sister is
#: relocating") is often followed by the one that holds the answer ("To Lisbon!").
CONTEXT_TURNS = 2
CONTEXT_SHARE = 0.6
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


def fuse(ranked: dict[str, list[Hit]], weights: dict[str, float], limit: int) -> list[Hit]:
    """Reciprocal rank fusion: ``sum(w / (RRF_K + rank))`` over the methods that found it."""
    fused: dict[int, Hit] = {}
    for method, hits in ranked.items():
        for rank, hit in enumerate(hits, start=1):
            add = weights.get(method, 1.0) / (RRF_K + rank)
            if hit.doc_id in fused:
                merged = fused[hit.doc_id]
                merged.score += add
                merged.chunk_span = merged.chunk_span or hit.chunk_span
                merged.snippet = merged.snippet or hit.snippet
            else:
                fused[hit.doc_id] = Hit(hit.doc_id, add, hit.chunk_span, hit.snippet)
    return sorted(fused.values(), key=lambda h: -h.score)[:limit]


def spread_to_following_turns(
    store: DocumentStore,
    flt: Filter,
    hits: list[Hit],
    turns: int = CONTEXT_TURNS,
    share: float = CONTEXT_SHARE,
) -> list[Hit]:
    """Raise the next ``turns`` siblings after each hit (same parent, id order) to at
    least ``share`` of its score, and re-rank; siblings outside the filter never enter.

    Forward only, and undiminished over those turns: spreading backwards, or decaying
    with distance, measured worse (the answer sits after the question, often two turns
    on, behind a reply such as "Where to?")."""
    if turns <= 0 or not hits:
        return hits
    scored = {h.doc_id: Hit(h.doc_id, h.score, h.chunk_span, h.snippet) for h in hits}
    with store.lock:
        for hit in hits:
            parent = store.conn.execute(
                "SELECT parent_id FROM documents WHERE id = ?", (hit.doc_id,)
            ).fetchone()
            if parent is None or parent[0] is None:
                continue
            rows = store.conn.execute(
                "SELECT d.id FROM documents d WHERE d.parent_id = ? AND d.id > ?"
                f" AND {flt.where} ORDER BY d.id LIMIT ?",
                [parent[0], hit.doc_id, *flt.params, turns],
            ).fetchall()
            for (doc_id,) in rows:
                # The larger of its own score and the share, never their sum: a reply
                # must not outrank the hit it follows on borrowed credit.
                if doc_id not in scored:
                    scored[doc_id] = Hit(doc_id, 0.0)
                scored[doc_id].score = max(scored[doc_id].score, hit.score * share)
    return sorted(scored.values(), key=lambda h: -h.score)


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
        kind = "fused_rank"
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
        weights = {_FUSABLE.get(k, k): v for k, v in (request.weights or {}).items()}
    depth = max(request.limit * 3, 30)
    ranked: dict[str, list[Hit]] = {}
    if "vector" in methods:
        ranked["vector"] = vector_hits(store, flt, request.query, depth, exact=request.exact)
    if "fulltext" in methods:
        ranked["fulltext"] = fulltext_hits(store, flt, request.query, depth)
    resolved = {m: weights.get(m, DEFAULT_WEIGHTS[m]) for m in methods}
    turns = request.context_turns if isinstance(request, HybridSearchRequest) else 0
    fused = spread_to_following_turns(store, flt, fuse(ranked, resolved, depth), turns)
    return fused[: request.limit], _applied(
        request, methods=methods, weights=resolved, context_turns=turns
    )
