"""``/workspace/{id}``: the current view of an append-only workspace."""

from fastapi import APIRouter

from home.jmfts.models import WorkspaceView
from home.jmfts.routes.dependencies import DocId, Store, Who
from home.jmfts.workspace import workspace_view

router = APIRouter(tags=["workspace"])


@router.get("/workspace/{document_id}", response_model=WorkspaceView)
def workspace(document_id: DocId, who: Who, store: Store) -> WorkspaceView:
    """The current state of an append-only workspace, computed now."""
    return workspace_view(store, who, document_id)
