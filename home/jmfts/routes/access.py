"""``/access/*``: principals, their bearer tokens, and grants on document subtrees.

Principals and tokens are the owner's alone (403 for anyone else). A grant route
first looks the document up as the caller, so a document it was not granted is a
404 as on every route, and only then refuses a non-owner.
"""

import sqlite3

from fastapi import APIRouter

from home.jmfts.access import Principal
from home.jmfts.clock import from_stored
from home.jmfts.errors import Forbidden
from home.jmfts.models import (
    GrantCreate,
    GrantResponse,
    PrincipalCreate,
    PrincipalResponse,
    TokenCreate,
    TokenMintResponse,
    TokenResponse,
)
from home.jmfts.routes.dependencies import DocId, Owner, RowId, Store, Who
from home.jmfts.store import DocumentStore

router = APIRouter(tags=["access"])


# -- principals and tokens ---------------------------------------------------------------


@router.post("/access/principals", response_model=PrincipalResponse)
def create_principal(body: PrincipalCreate, _: Owner, store: Store) -> PrincipalResponse:
    """Create a non-owner principal."""
    return _principal_response(store.create_principal(body.name))


@router.get("/access/principals", response_model=list[PrincipalResponse])
def list_principals(_: Owner, store: Store) -> list[PrincipalResponse]:
    """Every principal."""
    with store.lock:
        return [_principal_response(r) for r in store.access.principals()]


@router.delete("/access/principals/{principal_id}")
def delete_principal(principal_id: RowId, _: Owner, store: Store) -> dict[str, int]:
    """Delete a principal with its tokens and grants."""
    store.delete_principal(principal_id)
    return {"deleted": principal_id}


@router.post("/access/principals/{principal_id}/tokens", response_model=TokenMintResponse)
def mint_token(principal_id: RowId, body: TokenCreate, _: Owner, store: Store) -> TokenMintResponse:
    """Mint a bearer token; the raw token is in this response and nowhere else."""
    row, raw = store.mint_token(principal_id, body.label, body.expires_at)
    return TokenMintResponse(
        id=row["id"],
        principal_id=row["principal_id"],
        token=raw,
        label=row["label"],
        created_at=from_stored(row["created_at"]),
        expires_at=from_stored(row["expires_at"]),
    )


@router.get("/access/principals/{principal_id}/tokens", response_model=list[TokenResponse])
def list_tokens(principal_id: RowId, _: Owner, store: Store) -> list[TokenResponse]:
    """A principal's tokens (metadata only)."""
    with store.lock:
        return [_token_response(r) for r in store.access.tokens(principal_id)]


@router.delete("/access/tokens/{token_id}")
def revoke_token(token_id: RowId, _: Owner, store: Store) -> dict[str, int]:
    """Revoke a token."""
    store.revoke_token(token_id)
    return {"revoked": token_id}


# -- grants ------------------------------------------------------------------------------


@router.post("/access/documents/{document_id}/grants", response_model=GrantResponse)
def grant(document_id: DocId, body: GrantCreate, who: Who, store: Store) -> GrantResponse:
    """Grant a principal read or write on a subtree (owner only)."""
    _require_owner_on(store, who, document_id, "grants access")
    return _grant_response(store.grant(document_id, body.principal_id, body.level))


@router.get("/access/documents/{document_id}/grants", response_model=list[GrantResponse])
def list_grants(document_id: DocId, who: Who, store: Store) -> list[GrantResponse]:
    """The grants on a document (owner only)."""
    _require_owner_on(store, who, document_id, "lists grants")
    with store.lock:
        return [_grant_response(r) for r in store.access.grants(document_id)]


@router.delete("/access/documents/{document_id}/grants/{principal_id}")
def revoke_grant(document_id: DocId, principal_id: RowId, who: Who, store: Store) -> dict[str, int]:
    """Remove a principal's grant on a document (owner only)."""
    _require_owner_on(store, who, document_id, "revokes grants")
    store.revoke_grant(document_id, principal_id)
    return {"document_id": document_id, "principal_id": principal_id}


def _require_owner_on(store: DocumentStore, who: Principal, document_id: int, act: str) -> None:
    """404 for a document ``who`` cannot read (as everywhere), then 403 unless the owner."""
    store.visible(who, document_id)
    if not who.is_owner:
        raise Forbidden(f"only the owner principal {act}")


def _principal_response(r: sqlite3.Row) -> PrincipalResponse:
    return PrincipalResponse(
        id=r["id"],
        name=r["name"],
        is_owner=bool(r["is_owner"]),
        created_at=from_stored(r["created_at"]),
    )


def _token_response(r: sqlite3.Row) -> TokenResponse:
    return TokenResponse(
        id=r["id"],
        principal_id=r["principal_id"],
        label=r["label"],
        created_at=from_stored(r["created_at"]),
        expires_at=from_stored(r["expires_at"]),
        revoked_at=from_stored(r["revoked_at"]),
    )


def _grant_response(r: sqlite3.Row) -> GrantResponse:
    return GrantResponse(
        id=r["id"],
        document_id=r["document_id"],
        principal_id=r["principal_id"],
        level=r["level"],
        created_at=from_stored(r["created_at"]),
    )
