"""Every JMFTS write as one entry of a log: what the writer decided, in a form that travels.

A write is made in two halves (docs/architecture.md "Memory"). The writer *prepares*
it, with no lock held: whatever is not a function of the store's rows is decided
then and put in the entry — the moment of the write, the embedding vectors of its
text, a new token's secret (only its hash: the raw token never leaves the writer).
The store then *applies* the entry: it checks it against the rows (a parent that is
gone, a grant that was revoked meanwhile) and writes it in one transaction.
Applying is a function of the rows and the entry alone, so the same entries applied
in the same order to two empty stores give the same rows, ids included; that is
what lets a log of entries be the store's write-ahead log, each member's database
a view of it.

:class:`LocalLog` applies each entry at once: one ``home up``, today's behaviour and
speed. The entries' wire form (:meth:`Entry.to_wire`, :func:`from_wire`) is JSON
with the vectors as base64 float32.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, TypeAdapter

from home.jmfts.access import Principal
from home.jmfts.chunk_embedding import Embedded
from home.jmfts.errors import InvalidInput
from home.jmfts.models import (
    DocumentCreate,
    DocumentUpdate,
    PredicateCreate,
    TripleCreate,
    TripleInvalidateRequest,
    TripleSupersedRequest,
)


def _embedded_to_wire(embedded: Embedded) -> dict[str, Any]:
    vectors = np.ascontiguousarray(embedded.vectors, dtype=np.float32)
    return {
        "spans": [list(span) for span in embedded.spans],
        "dimension": int(vectors.shape[1]) if vectors.ndim == 2 else 0,
        "vectors": base64.b64encode(vectors.tobytes()).decode("ascii"),
    }


def _embedded_from_wire(value: object) -> Embedded:
    if isinstance(value, Embedded):
        return value
    if not isinstance(value, dict):
        raise ValueError("embedded: expected an object with spans, dimension and vectors")
    spans = [(int(a), int(b)) for a, b in value["spans"]]
    flat = np.frombuffer(base64.b64decode(value["vectors"]), dtype=np.float32)
    dimension = int(value["dimension"])
    if dimension <= 0 and spans:
        raise ValueError("embedded: a positive dimension is needed for its chunks")
    vectors = flat.reshape(len(spans), dimension) if spans else flat.reshape(0, max(dimension, 0))
    return Embedded(spans, vectors)


#: Chunks and their vectors, as the writer embedded them (the view never re-embeds).
Vectors = Annotated[
    Embedded,
    PlainValidator(_embedded_from_wire),
    PlainSerializer(_embedded_to_wire, return_type=dict),
]


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    #: When the writer made the write: every timestamp the entry leaves in the rows.
    at: datetime

    def to_wire(self) -> bytes:
        """The entry as log bytes."""
        return self.model_dump_json().encode()


class DocumentEntry(_Entry):
    """A write of documents (:class:`home.jmfts.store.DocumentStore` applies it)."""


class AccessEntry(_Entry):
    """A write of principals, tokens or grants (:mod:`home.jmfts.access_writes`)."""


class TripleEntry(_Entry):
    """A write of predicates or triples (:class:`home.jmfts.triples.TripleStore`)."""


# -- documents ------------------------------------------------------------------------


class NewDocument(BaseModel):
    """One caller's document in a :class:`CreateEach`."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    principal: Principal
    request: DocumentCreate
    embedded: Vectors


class CreateEach(DocumentEntry):
    """Several callers' documents; each stands or fails alone (group commit)."""

    op: Literal["create_each"] = "create_each"
    writes: list[NewDocument]


class CreateAll(DocumentEntry):
    """One caller's batch: all documents or none."""

    op: Literal["create_all"] = "create_all"
    principal: Principal
    requests: list[DocumentCreate]
    embedded: list[Vectors]


class Update(DocumentEntry):
    """Fields of one document; ``embedded``: the vectors of the text the writer saw, when
    it changed."""

    op: Literal["update"] = "update"
    principal: Principal
    document_id: int
    request: DocumentUpdate
    embedded: Vectors | None


class Delete(DocumentEntry):
    """A document and its subtree."""

    op: Literal["delete"] = "delete"
    principal: Principal
    document_id: int


class Reembed(DocumentEntry):
    """A document's vectors, computed again."""

    op: Literal["reembed"] = "reembed"
    principal: Principal
    document_id: int
    embedded: Vectors


# -- access ---------------------------------------------------------------------------


class CreatePrincipal(AccessEntry):
    """A principal; the owner one is made once (a second is the first)."""

    op: Literal["create_principal"] = "create_principal"
    name: str = Field(min_length=1, max_length=200)  # as PrincipalCreate
    is_owner: bool = False


class DeletePrincipal(AccessEntry):
    op: Literal["delete_principal"] = "delete_principal"
    principal_id: int


class MintToken(AccessEntry):
    """A token's row; its secret stays with the writer, only the hash is logged."""

    op: Literal["mint_token"] = "mint_token"
    principal_id: int
    label: str | None
    expires_at: datetime | None
    secret_sha256: str


class RevokeToken(AccessEntry):
    op: Literal["revoke_token"] = "revoke_token"
    token_id: int


class Grant(AccessEntry):
    op: Literal["grant"] = "grant"
    document_id: int
    principal_id: int
    level: Literal["read", "write"]


class RevokeGrant(AccessEntry):
    op: Literal["revoke_grant"] = "revoke_grant"
    document_id: int
    principal_id: int


# -- triples --------------------------------------------------------------------------


class CreatePredicate(TripleEntry):
    op: Literal["create_predicate"] = "create_predicate"
    principal: Principal
    request: PredicateCreate


class CreateTriple(TripleEntry):
    op: Literal["create_triple"] = "create_triple"
    principal: Principal
    request: TripleCreate


class SupersedeTriple(TripleEntry):
    op: Literal["supersede_triple"] = "supersede_triple"
    principal: Principal
    triple_id: int
    request: TripleSupersedRequest


class InvalidateTriple(TripleEntry):
    op: Literal["invalidate_triple"] = "invalidate_triple"
    principal: Principal
    triple_id: int
    request: TripleInvalidateRequest


class DeleteTriple(TripleEntry):
    op: Literal["delete_triple"] = "delete_triple"
    principal: Principal
    triple_id: int


Entry = Annotated[
    CreateEach
    | CreateAll
    | Update
    | Delete
    | Reembed
    | CreatePrincipal
    | DeletePrincipal
    | MintToken
    | RevokeToken
    | Grant
    | RevokeGrant
    | CreatePredicate
    | CreateTriple
    | SupersedeTriple
    | InvalidateTriple
    | DeleteTriple,
    Field(discriminator="op"),
]
_ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)


def from_wire(data: bytes) -> Entry:
    """An entry from log bytes; malformed bytes are :class:`InvalidInput` naming the field."""
    try:
        return _ENTRY.validate_json(data)
    except ValueError as exc:
        raise InvalidInput(f"write log entry: {exc}") from exc


class Applies(Protocol):
    """A store that entries are applied to (:meth:`home.jmfts.store.DocumentStore.apply`)."""

    def apply(self, entry: Entry) -> Any:
        """Write ``entry``; its result, or the error its checks raise."""


class WriteLog(Protocol):
    """Where a store commits its prepared writes."""

    def commit(self, entry: Entry) -> Any:
        """Apply ``entry`` to the store (and whatever else views the log); its result."""


class LocalLog:
    """The log of a store nobody else views: each entry is applied as it is written."""

    def __init__(self, store: Applies) -> None:
        self._store = store

    def commit(self, entry: Entry) -> Any:
        """Apply ``entry`` now; its result, or its error raised."""
        return self._store.apply(entry)
