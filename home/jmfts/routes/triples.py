"""``/triples/*``: predicates, and bitemporal triples (record, query, supersede, invalidate)."""

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from home.jmfts.errors import InvalidInput
from home.jmfts.models import (
    PredicateCreate,
    PredicateResponse,
    TripleCreate,
    TripleDetailResponse,
    TripleInvalidateRequest,
    TripleResponse,
    TripleSupersedRequest,
)
from home.jmfts.routes.dependencies import MAX_ID, RowId, Triples, Who

router = APIRouter(tags=["triples"])


# -- predicates --------------------------------------------------------------------------


@router.post("/triples/predicates", response_model=PredicateResponse)
def create_predicate(body: PredicateCreate, who: Who, triples: Triples) -> PredicateResponse:
    """Create a predicate (private to its creator unless the owner makes it)."""
    return triples.create_predicate(who, body)


@router.get("/triples/predicates", response_model=list[PredicateResponse])
def list_predicates(
    who: Who, triples: Triples, namespace: str | None = None, with_triples_only: bool = False
) -> list[PredicateResponse]:
    """The predicates the caller sees: the owner's, its own, those of triples it reads."""
    return triples.list_predicates(who, namespace)


@router.get("/triples/predicates/{predicate_id}", response_model=PredicateResponse)
def get_predicate(predicate_id: RowId, who: Who, triples: Triples) -> PredicateResponse:
    """One predicate the caller sees; any other is 404."""
    return triples.get_predicate(who, predicate_id)


# -- triples -----------------------------------------------------------------------------


@router.post("/triples", response_model=TripleResponse)
def create_triple(
    body: TripleCreate, who: Who, triples: Triples, dedup: bool = False
) -> TripleResponse:
    """Record a triple (write access to the subject needed)."""
    return triples.create(who, body)


@router.get("/triples/query", response_model=list[TripleDetailResponse])
def query_triples(
    who: Who,
    triples: Triples,
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


@router.get("/triples/{triple_id}", response_model=TripleResponse)
def get_triple(triple_id: RowId, who: Who, triples: Triples) -> TripleResponse:
    """One triple."""
    return triples.get(who, triple_id)


@router.post("/triples/{triple_id}/supersede", response_model=TripleResponse)
def supersede_triple(
    triple_id: RowId, body: TripleSupersedRequest, who: Who, triples: Triples
) -> TripleResponse:
    """Record a successor; the old triple's windows close and both remain."""
    return triples.supersede(who, triple_id, body)


@router.post("/triples/{triple_id}/invalidate", response_model=TripleResponse)
def invalidate_triple(
    triple_id: RowId, body: TripleInvalidateRequest, who: Who, triples: Triples
) -> TripleResponse:
    """Stop believing a triple (its record window closes; it remains for ``as_of``)."""
    return triples.invalidate(who, triple_id, body)


@router.delete("/triples/{triple_id}")
def delete_triple(triple_id: RowId, who: Who, triples: Triples) -> dict[str, int]:
    """Erase a triple."""
    triples.delete(who, triple_id)
    return {"deleted": triple_id}
