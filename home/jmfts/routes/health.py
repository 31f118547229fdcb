"""``GET /``: liveness, API version and embedding model; the one route without a token."""

from fastapi import APIRouter

from home.jmfts.models import API_VERSION, HealthResponse
from home.jmfts.routes.dependencies import Store

router = APIRouter(tags=["health"])


@router.get("/", response_model=HealthResponse)
def health(store: Store) -> HealthResponse:
    """Liveness, API version and embedding model; needs no token."""
    with store.lock:
        store.conn.execute("SELECT 1").fetchone()
    return HealthResponse(
        status="ok",
        version=API_VERSION,
        database="sqlite-wal",
        embedding_model=store.embedder.model_name,
    )
