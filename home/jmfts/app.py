"""The HTTP surface (FastAPI): routes follow the real JMFTS API as its PyPI clients use it.

Every route but ``GET /`` needs a bearer token. Documents a principal was not granted are
absent: every route answers 404 for them, exactly as for ids that never existed.

Every request is counted by outcome in ``app.state.answers`` (the status code as a
string, ``internal`` for an exception no handler named): an unexpected failure is
a 500 with a fixed body, logged in one line, and the next request is served.

(No ``from __future__ import annotations`` here: FastAPI must see the dependency aliases
defined inside :func:`create_app` as objects, not as strings it cannot resolve.)
"""

import logging
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from home.jmfts import search as search_mod
from home.jmfts.access import Principal
from home.jmfts.clock import from_stored
from home.jmfts.errors import Forbidden, InvalidInput, JmftsError, Unauthorized
from home.jmfts.models import (
    API_VERSION,
    DeleteResponse,
    DocumentBatch,
    DocumentCreate,
    DocumentResponse,
    DocumentUpdate,
    EmbedResponse,
    GrantCreate,
    GrantResponse,
    HealthResponse,
    HybridSearchRequest,
    PredicateCreate,
    PredicateResponse,
    PrincipalCreate,
    PrincipalResponse,
    SearchRequest,
    SearchResponse,
    SubtreeResponse,
    TokenCreate,
    TokenMintResponse,
    TokenResponse,
    TripleCreate,
    TripleDetailResponse,
    TripleInvalidateRequest,
    TripleResponse,
    TripleSupersedRequest,
    WorkspaceView,
)
from home.jmfts.rows import content_hash, document_response
from home.jmfts.store import DocumentStore
from home.jmfts.triples import TripleStore
from home.jmfts.workspace import workspace_view

#: SQLite integers are 64-bit signed; larger ids cannot exist, so they are refused as input.
MAX_ID = 2**63 - 1
DocId = Annotated[int, Path(ge=1, le=MAX_ID)]
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]
log = logging.getLogger(__name__)

_bearer = HTTPBearer(auto_error=False, description="A JMFTS bearer token (jm_<id>_<secret>).")


def _printable(part: object) -> object:
    """One element of an error's location, safe to encode (a key may hold a lone surrogate)."""
    if isinstance(part, str):
        return part.encode("utf-8", "backslashreplace").decode("utf-8")[:200]
    return part


def create_app(store: DocumentStore) -> FastAPI:
    """Build the FastAPI app over an open store."""
    app = FastAPI(
        title="tether JMFTS",
        version=API_VERSION,
        description="Durable, access-controlled memory: documents, search, grants, triples.",
    )
    triples = TripleStore(store)
    answers: Counter[str] = Counter()
    app.state.answers = answers

    @app.middleware("http")
    async def _boundary(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        try:
            response = await call_next(request)
        except Exception as exc:
            answers["internal"] += 1
            log.error("jmfts: %s %s failed: %r", request.method, request.url.path[:200], exc)
            return JSONResponse({"detail": "internal error"}, status_code=500)
        answers[str(response.status_code)] += 1
        return response

    @app.exception_handler(JmftsError)
    async def _jmfts_error(_: Request, exc: JmftsError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(OverflowError)
    async def _overflow(_: Request, exc: OverflowError) -> JSONResponse:
        return JSONResponse({"detail": f"integer out of range: {exc}"}, status_code=400)

    @app.exception_handler(UnicodeEncodeError)
    async def _unicode(_: Request, exc: UnicodeEncodeError) -> JSONResponse:
        return JSONResponse({"detail": f"text is not valid UTF-8: {exc.reason}"}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Name the field, never echo the input: it may be megabytes, or not encodable at
        # all (a lone surrogate made the default 422 itself fail with a 500).
        detail = [
            {"loc": [_printable(part) for part in error["loc"]], "msg": error["msg"]}
            for error in exc.errors()
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    def principal(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        with store.lock:
            return store.access.authenticate(credentials.credentials if credentials else None)

    def owner(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if not who.is_owner:
            raise Forbidden("only the owner principal manages principals, tokens and grants")
        return who

    Who = Annotated[Principal, Depends(principal)]
    Owner = Annotated[Principal, Depends(owner)]

    # -- health -------------------------------------------------------------------------

    @app.get("/", response_model=HealthResponse, tags=["health"])
    def health() -> HealthResponse:
        """Liveness, API version and embedding model; needs no token."""
        with store.lock:
            store.conn.execute("SELECT 1").fetchone()
        return HealthResponse(
            status="ok",
            version=API_VERSION,
            database="sqlite-wal",
            embedding_model=store.embedder.model_name,
        )

    # -- documents ---------------------------------------------------------------------

    @app.post("/documents", response_model=DocumentResponse, tags=["documents"])
    def create_document(body: DocumentCreate, who: Who, dedup: bool = False) -> DocumentResponse:
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

    @app.post("/documents/batch", response_model=list[DocumentResponse], tags=["documents"])
    def create_documents(body: DocumentBatch, who: Who) -> list[DocumentResponse]:
        """Create up to 1000 documents in one transaction (all or none), embedded in one
        batch; every one is findable when this returns. Parents must already exist."""
        return store.create_many(who, body.documents)

    @app.get("/documents", response_model=list[DocumentResponse], tags=["documents"])
    def list_documents(
        who: Who,
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

    @app.get("/documents/roots", response_model=list[DocumentResponse], tags=["documents"])
    def roots(who: Who) -> list[DocumentResponse]:
        """Top-level documents this principal can read."""
        return store.roots(who)

    @app.get("/documents/{document_id}", response_model=DocumentResponse, tags=["documents"])
    def get_document(document_id: DocId, who: Who, include_embed: bool = False) -> DocumentResponse:
        """One document."""
        return store.get(who, document_id, include_embed=include_embed)

    @app.patch("/documents/{document_id}", response_model=DocumentResponse, tags=["documents"])
    def update_document(document_id: DocId, body: DocumentUpdate, who: Who) -> DocumentResponse:
        """Update fields (re-embedded before this returns) or move under ``parent_id``."""
        return store.update(who, document_id, body)

    @app.delete("/documents/{document_id}", response_model=DeleteResponse, tags=["documents"])
    def delete_document(document_id: DocId, who: Who) -> DeleteResponse:
        """Delete a document and its subtree."""
        ids = store.delete(who, document_id)
        return DeleteResponse(deleted=len(ids), ids=ids)

    @app.get(
        "/documents/{document_id}/children",
        response_model=list[DocumentResponse],
        tags=["documents"],
    )
    def children(
        document_id: DocId,
        who: Who,
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

    @app.get("/documents/{document_id}/subtree", response_model=SubtreeResponse, tags=["documents"])
    def subtree(
        document_id: DocId,
        who: Who,
        max_depth: Annotated[int | None, Query(ge=0, le=10000)] = None,
        include_in_flight: bool = False,
        usetype: str | None = None,
    ) -> SubtreeResponse:
        """A document with every readable descendant."""
        root, descendants = store.subtree(who, document_id, max_depth=max_depth, usetype=usetype)
        return SubtreeResponse(root=root, descendants=descendants, total=len(descendants) + 1)

    @app.get(
        "/documents/{document_id}/ancestors",
        response_model=list[DocumentResponse],
        tags=["documents"],
    )
    def ancestors(document_id: DocId, who: Who) -> list[DocumentResponse]:
        """Readable ancestors, root first."""
        return store.ancestors(who, document_id)

    @app.post("/documents/{document_id}/embed", response_model=EmbedResponse, tags=["documents"])
    def embed_document(
        document_id: DocId, who: Who, with_tokens: bool = True, write_importance: bool = False
    ) -> EmbedResponse:
        """Recompute a document's vectors (writes already embed; this is idempotent)."""
        chunks = store.reembed(who, document_id)
        return EmbedResponse(
            document_id=document_id,
            chunks=chunks,
            dimension=store.embedder.dimension,
            model=store.embedder.model_name,
        )

    # -- search ------------------------------------------------------------------------

    @app.post("/search/vector", response_model=SearchResponse, tags=["search"])
    def vector_search(body: SearchRequest, who: Who) -> SearchResponse:
        """Cosine similarity of the query to each document's best chunk; ``threshold`` gates."""
        return search_mod.search(store, who, "vector", body)

    @app.post("/search/fulltext", response_model=SearchResponse, tags=["search"])
    def fulltext_search(body: SearchRequest, who: Who) -> SearchResponse:
        """SQLite FTS5, ranked by BM25 (score = -bm25: higher is better)."""
        return search_mod.search(store, who, "fulltext", body)

    @app.post("/search/bm25", response_model=SearchResponse, tags=["search"])
    def bm25_search(body: SearchRequest, who: Who, index_name: str = "default") -> SearchResponse:
        """Alias of ``/search/fulltext`` (one BM25 index over every document)."""
        return search_mod.search(store, who, "bm25", body)

    @app.post("/search/hybrid", response_model=SearchResponse, tags=["search"])
    def hybrid_search(body: HybridSearchRequest, who: Who) -> SearchResponse:
        """Reciprocal rank fusion of vector and full-text ranks; scores are fused ranks."""
        return search_mod.search(store, who, "hybrid", body)

    # -- workspace ---------------------------------------------------------------------

    @app.get("/workspace/{document_id}", response_model=WorkspaceView, tags=["workspace"])
    def workspace(document_id: DocId, who: Who) -> WorkspaceView:
        """The current state of an append-only workspace, computed now."""
        return workspace_view(store, who, document_id)

    # -- access ------------------------------------------------------------------------

    @app.post("/access/principals", response_model=PrincipalResponse, tags=["access"])
    def create_principal(body: PrincipalCreate, _: Owner) -> PrincipalResponse:
        """Create a non-owner principal."""
        with store.transaction():
            return _principal_response(store.access.create_principal(body.name))

    @app.get("/access/principals", response_model=list[PrincipalResponse], tags=["access"])
    def list_principals(_: Owner) -> list[PrincipalResponse]:
        """Every principal."""
        with store.lock:
            return [_principal_response(r) for r in store.access.principals()]

    @app.delete("/access/principals/{principal_id}", tags=["access"])
    def delete_principal(principal_id: RowId, _: Owner) -> dict[str, int]:
        """Delete a principal with its tokens and grants."""
        with store.transaction():
            store.access.delete_principal(principal_id)
        return {"deleted": principal_id}

    @app.post(
        "/access/principals/{principal_id}/tokens",
        response_model=TokenMintResponse,
        tags=["access"],
    )
    def mint_token(principal_id: RowId, body: TokenCreate, _: Owner) -> TokenMintResponse:
        """Mint a bearer token; the raw token is in this response and nowhere else."""
        with store.transaction():
            row, raw = store.access.mint_token(principal_id, body.label, body.expires_at)
        return TokenMintResponse(
            id=row["id"],
            principal_id=row["principal_id"],
            token=raw,
            label=row["label"],
            created_at=from_stored(row["created_at"]),
            expires_at=from_stored(row["expires_at"]),
        )

    @app.get(
        "/access/principals/{principal_id}/tokens",
        response_model=list[TokenResponse],
        tags=["access"],
    )
    def list_tokens(principal_id: RowId, _: Owner) -> list[TokenResponse]:
        """A principal's tokens (metadata only)."""
        with store.lock:
            return [
                TokenResponse(
                    id=r["id"],
                    principal_id=r["principal_id"],
                    label=r["label"],
                    created_at=from_stored(r["created_at"]),
                    expires_at=from_stored(r["expires_at"]),
                    revoked_at=from_stored(r["revoked_at"]),
                )
                for r in store.access.tokens(principal_id)
            ]

    @app.delete("/access/tokens/{token_id}", tags=["access"])
    def revoke_token(token_id: RowId, _: Owner) -> dict[str, int]:
        """Revoke a token."""
        with store.transaction():
            store.access.revoke_token(token_id)
        return {"revoked": token_id}

    @app.post(
        "/access/documents/{document_id}/grants", response_model=GrantResponse, tags=["access"]
    )
    def grant(document_id: DocId, body: GrantCreate, who: Who) -> GrantResponse:
        """Grant a principal read or write on a subtree (owner only)."""
        store.visible(who, document_id)
        if not who.is_owner:
            raise Forbidden("only the owner principal grants access")
        with store.transaction():
            return _grant_response(store.access.grant(document_id, body.principal_id, body.level))

    @app.get(
        "/access/documents/{document_id}/grants",
        response_model=list[GrantResponse],
        tags=["access"],
    )
    def list_grants(document_id: DocId, who: Who) -> list[GrantResponse]:
        """The grants on a document (owner only)."""
        store.visible(who, document_id)
        if not who.is_owner:
            raise Forbidden("only the owner principal lists grants")
        with store.lock:
            return [_grant_response(r) for r in store.access.grants(document_id)]

    @app.delete("/access/documents/{document_id}/grants/{principal_id}", tags=["access"])
    def revoke_grant(document_id: DocId, principal_id: RowId, who: Who) -> dict[str, int]:
        """Remove a principal's grant on a document (owner only)."""
        store.visible(who, document_id)
        if not who.is_owner:
            raise Forbidden("only the owner principal revokes grants")
        with store.transaction():
            store.access.revoke_grant(document_id, principal_id)
        return {"document_id": document_id, "principal_id": principal_id}

    # -- triples -----------------------------------------------------------------------

    @app.post("/triples/predicates", response_model=PredicateResponse, tags=["triples"])
    def create_predicate(body: PredicateCreate, who: Who) -> PredicateResponse:
        """Create a predicate (private to its creator unless the owner makes it)."""
        return triples.create_predicate(who, body)

    @app.get("/triples/predicates", response_model=list[PredicateResponse], tags=["triples"])
    def list_predicates(
        who: Who, namespace: str | None = None, with_triples_only: bool = False
    ) -> list[PredicateResponse]:
        """The predicates the caller sees: the owner's, its own, those of triples it reads."""
        return triples.list_predicates(who, namespace)

    @app.get(
        "/triples/predicates/{predicate_id}", response_model=PredicateResponse, tags=["triples"]
    )
    def get_predicate(predicate_id: RowId, who: Who) -> PredicateResponse:
        """One predicate the caller sees; any other is 404."""
        return triples.get_predicate(who, predicate_id)

    @app.post("/triples", response_model=TripleResponse, tags=["triples"])
    def create_triple(body: TripleCreate, who: Who, dedup: bool = False) -> TripleResponse:
        """Record a triple (write access to the subject needed)."""
        return triples.create(who, body)

    @app.get("/triples/query", response_model=list[TripleDetailResponse], tags=["triples"])
    def query_triples(
        who: Who,
        entity_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
        predicate_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
        predicate: str | None = None,
        direction: str = "both",
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
        valid_only: bool = False,
        valid_at: datetime | None = None,
        as_of: datetime | None = None,
        fact_type: str | None = None,
        include_invalidated: bool = True,
        coreferent: bool = False,
    ) -> list[TripleDetailResponse]:
        """Triples by entity/predicate; ``valid_at`` (valid time) and ``as_of`` (record
        time: what was believed then)."""
        if coreferent:
            raise InvalidInput("coreferent expansion is not supported by this appliance")
        return triples.query(
            who,
            entity_id=entity_id,
            predicate_id=predicate_id,
            predicate=predicate,
            direction=direction,
            valid_at=valid_at,
            valid_only=valid_only,
            as_of=as_of,
            include_invalidated=include_invalidated,
            fact_type=fact_type,
            limit=limit,
            offset=offset,
        )

    @app.get("/triples/{triple_id}", response_model=TripleResponse, tags=["triples"])
    def get_triple(triple_id: RowId, who: Who) -> TripleResponse:
        """One triple."""
        return triples.get(who, triple_id)

    @app.post("/triples/{triple_id}/supersede", response_model=TripleResponse, tags=["triples"])
    def supersede_triple(triple_id: RowId, body: TripleSupersedRequest, who: Who) -> TripleResponse:
        """Record a successor; the old triple's windows close and both remain."""
        return triples.supersede(who, triple_id, body)

    @app.post("/triples/{triple_id}/invalidate", response_model=TripleResponse, tags=["triples"])
    def invalidate_triple(
        triple_id: RowId, body: TripleInvalidateRequest, who: Who
    ) -> TripleResponse:
        """Stop believing a triple (its record window closes; it remains for ``as_of``)."""
        return triples.invalidate(who, triple_id, body)

    @app.delete("/triples/{triple_id}", tags=["triples"])
    def delete_triple(triple_id: RowId, who: Who) -> dict[str, int]:
        """Erase a triple."""
        triples.delete(who, triple_id)
        return {"deleted": triple_id}

    return app


def _principal_response(r: sqlite3.Row) -> PrincipalResponse:
    return PrincipalResponse(
        id=r["id"],
        name=r["name"],
        is_owner=bool(r["is_owner"]),
        created_at=from_stored(r["created_at"]),
    )


def _grant_response(r: sqlite3.Row) -> GrantResponse:
    return GrantResponse(
        id=r["id"],
        document_id=r["document_id"],
        principal_id=r["principal_id"],
        level=r["level"],
        created_at=from_stored(r["created_at"]),
    )
