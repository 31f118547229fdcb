"""What the routes depend on: the stores on ``app.state``, the caller, and path ids.

:func:`home.jmfts.app.create_app` puts the open :class:`DocumentStore` and its
:class:`TripleStore` on ``app.state``; a route asks for them (and for the
authenticated :class:`Principal`) as parameters, so no route closes over state.
"""

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from home.jmfts.access import Principal
from home.jmfts.errors import Forbidden
from home.jmfts.store import DocumentStore
from home.jmfts.triples import TripleStore

#: SQLite integers are 64-bit signed; larger ids cannot exist, so they are refused as input.
MAX_ID = 2**63 - 1
DocId = Annotated[int, Path(ge=1, le=MAX_ID)]
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]

_bearer = HTTPBearer(auto_error=False, description="A JMFTS bearer token (jm_<id>_<secret>).")


async def document_store(request: Request) -> DocumentStore:
    """The app's open document store."""
    store: DocumentStore = request.app.state.store
    return store


async def triple_store(request: Request) -> TripleStore:
    """The app's triple store (over the same database)."""
    triples: TripleStore = request.app.state.triples
    return triples


Store = Annotated[DocumentStore, Depends(document_store)]
Triples = Annotated[TripleStore, Depends(triple_store)]


def principal(
    store: Store,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The principal the bearer token names; no or a bad token is 401."""
    return store.authenticate(credentials.credentials if credentials else None)


Who = Annotated[Principal, Depends(principal)]


def owner(who: Who) -> Principal:
    """The caller, when it is the owner principal; anyone else is 403."""
    if not who.is_owner:
        raise Forbidden("only the owner principal manages principals, tokens and grants")
    return who


Owner = Annotated[Principal, Depends(owner)]
