"""``/documents``: create, read, update, delete and walk the document tree."""

from typing import Annotated

from fastapi import APIRouter, Query, Response

from home.jmfts.models import (
    DeleteResponse,
    DocumentBatch,
    DocumentCreate,
    DocumentResponse,
    DocumentUpdate,
    EmbedResponse,
    SubtreeResponse,
)
from home.jmfts.routes.dependencies import MAX_ID, DocId, Store, Who
from home.jmfts.rows import content_hash, document_response

router = APIRouter(tags=["documents"])


@router.post("/documents", response_model=DocumentResponse)
def create_document(
    body: DocumentCreate, who: Who, store: Store, dedup: bool = False
) -> DocumentResponse:
    """Create a document; it is searchable by every method when this returns."""
    if dedup and body.content is not None:
        existing = store.query(
            who,
            "d.parent_id IS ? AND d.title IS ? AND d.content_hash = ?",
            [body.parent_id, body.title, content_hash(body.content)],
            limit=1,
        )
        if existing:
            return document_response(existing[0])
    # Concurrent single writes share one embedder call and one commit (group commit).
    return store.writes.submit(who, body)


@router.post("/documents/batch", response_model=list[DocumentResponse])
def create_documents(body: DocumentBatch, who: Who, store: Store) -> list[DocumentResponse]:
    """Create up to 1000 documents in one transaction (all or none), embedded in one
    batch; every one is findable when this returns. Parents must already exist."""
    return store.create_many(who, body.documents)


@router.get("/documents", response_model=list[DocumentResponse])
def list_documents(
    who: Who,
    store: Store,
    parent_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    usetype: str | None = None,
    title_prefix: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> list[DocumentResponse]:
    """A page of readable documents."""
    return store.list_documents(
        who,
        parent_id=parent_id,
        usetype=usetype,
        title_prefix=title_prefix,
        limit=limit,
        offset=offset,
    )


@router.get("/documents/roots", response_model=list[DocumentResponse])
def roots(who: Who, store: Store) -> list[DocumentResponse]:
    """Top-level documents this principal can read."""
    return store.roots(who)


@router.get("/documents/{document_id}", response_model=DocumentResponse)
def get_document(
    document_id: DocId, who: Who, store: Store, include_embed: bool = False
) -> DocumentResponse:
    """One document."""
    return store.get(who, document_id, include_embed=include_embed)


@router.patch("/documents/{document_id}", response_model=DocumentResponse)
def update_document(
    document_id: DocId, body: DocumentUpdate, who: Who, store: Store
) -> DocumentResponse:
    """Update fields (re-embedded before this returns) or move under ``parent_id``."""
    return store.update(who, document_id, body)


@router.delete("/documents/{document_id}", response_model=DeleteResponse)
def delete_document(document_id: DocId, who: Who, store: Store) -> DeleteResponse:
    """Delete a document and its subtree."""
    ids = store.delete(who, document_id)
    return DeleteResponse(deleted=len(ids), ids=ids)


@router.get("/documents/{document_id}/children", response_model=list[DocumentResponse])
def children(
    document_id: DocId,
    who: Who,
    store: Store,
    title: str | None = None,
    title_prefix: str | None = None,
    usetype: str | None = None,
    depth: Annotated[int, Query(ge=-1, le=1000)] = 1,
    limit: Annotated[int, Query(ge=1, le=10000)] = 100,
) -> list[DocumentResponse]:
    """Children (``depth=1``), deeper descendants, or all of them (``depth=-1``)."""
    return store.children(
        who,
        document_id,
        depth=depth,
        usetype=usetype,
        title=title,
        title_prefix=title_prefix,
        limit=limit,
    )


@router.get("/documents/{document_id}/subtree", response_model=SubtreeResponse)
def subtree(
    document_id: DocId,
    who: Who,
    store: Store,
    max_depth: Annotated[int | None, Query(ge=0, le=10000)] = None,
    include_in_flight: bool = False,
    usetype: str | None = None,
    paths: Annotated[
        bool,
        Query(
            description="Give each descendant its full ancestor path; by default it is "
            "empty, and parent_id and depth place it under the root."
        ),
    ] = False,
) -> Response:
    """A document with every readable descendant (their ``path`` only with ``paths=true``).

    Serialized here, once: the answer is already a validated model, and FastAPI
    would validate it again (a third of the time of a τ conversation's load).
    """
    root, descendants = store.subtree(
        who, document_id, max_depth=max_depth, usetype=usetype, paths=paths
    )
    answer = SubtreeResponse(root=root, descendants=descendants, total=len(descendants) + 1)
    return Response(answer.model_dump_json(by_alias=True), media_type="application/json")


@router.get("/documents/{document_id}/ancestors", response_model=list[DocumentResponse])
def ancestors(document_id: DocId, who: Who, store: Store) -> list[DocumentResponse]:
    """Readable ancestors, root first."""
    return store.ancestors(who, document_id)


@router.post("/documents/{document_id}/embed", response_model=EmbedResponse)
def embed_document(
    document_id: DocId,
    who: Who,
    store: Store,
    with_tokens: bool = True,
    write_importance: bool = False,
) -> EmbedResponse:
    """Recompute a document's vectors (writes already embed; this is idempotent)."""
    chunks = store.reembed(who, document_id)
    return EmbedResponse(
        document_id=document_id,
        chunks=chunks,
        dimension=store.embedder.dimension,
        model=store.embedder.model_name,
    )
