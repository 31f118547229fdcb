"""``/search/*``: vector, full-text (BM25) and hybrid search over readable documents."""

from fastapi import APIRouter

from home.jmfts.models import HybridSearchRequest, SearchRequest, SearchResponse
from home.jmfts.routes.dependencies import Store, Who
from home.jmfts.search import search

router = APIRouter(tags=["search"])


@router.post("/search/vector", response_model=SearchResponse)
def vector_search(body: SearchRequest, who: Who, store: Store) -> SearchResponse:
    """Cosine similarity of the query to each document's best chunk; ``threshold`` gates."""
    return search(store, who, "vector", body)


@router.post("/search/fulltext", response_model=SearchResponse)
def fulltext_search(body: SearchRequest, who: Who, store: Store) -> SearchResponse:
    """SQLite FTS5, ranked by BM25 (score = -bm25: higher is better)."""
    return search(store, who, "fulltext", body)


@router.post("/search/bm25", response_model=SearchResponse)
def bm25_search(
    body: SearchRequest, who: Who, store: Store, index_name: str = "default"
) -> SearchResponse:
    """Alias of ``/search/fulltext`` (one BM25 index over every document)."""
    return search(store, who, "bm25", body)


@router.post("/search/hybrid", response_model=SearchResponse)
def hybrid_search(body: HybridSearchRequest, who: Who, store: Store) -> SearchResponse:
    """Reciprocal rank fusion of vector and full-text ranks; scores are fused ranks."""
    return search(store, who, "hybrid", body)
