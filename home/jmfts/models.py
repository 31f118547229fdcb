"""JMFTS wire shapes (pydantic), field-compatible with the real JMFTS API.

The reference is the PyPI ``jmfts-client`` contracts and ``tau_jmfts.client.JmftsClient``:
request models declare every field those clients serialise (with ``extra="forbid"``, as
upstream does), response models carry every field they validate. Our additions are
optional and documented: ``supersedes`` (workspace records), ``titled_path`` (roots),
``roots``/time-range search filters, and on each search hit ``id``, ``path`` (titled),
``title``, ``snippet``, ``usetype``, ``created_at`` and ``age``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

#: A workspace record of this usetype retracts the record it supersedes: it says "no
#: longer believed" and is itself no memory (``home memory forget``).
RETRACTION_USETYPE = "retraction"
#: Who or what the knowledge book's triples are about (``home/memory/knowledge.py``).
ENTITY_USETYPE = "entity"
#: Usetypes held out of search unless a request names them (docs/architecture.md "Memory").
DEFAULT_EXCLUDED_USETYPES: tuple[str, ...] = (ENTITY_USETYPE, "summary", RETRACTION_USETYPE)
#: A durable record the model wrote with ``jmfts_write`` (``home/effectors/jmfts_write.py``).
RECORD_USETYPE = "record"
#: A note in an agent's journal (``home/effectors/journal_append.py``).
JOURNAL_ENTRY_USETYPE = "journal_entry"
#: What τ stores a conversation as (``tau_jmfts``): its root, each turn word for word, and
#: its compaction summaries. A search for what is remembered leaves them out unless asked:
#: a turn is what was said, not what was kept of it (the question itself would match).
CONVERSATION_USETYPES: tuple[str, ...] = (
    "tau:conversation",
    "tau:message",
    "tau:compaction",
    "tau:branch_summary",
)
#: The memory reflex files each memory as ``memory:<kind>`` (``home/memory/kinds.py``).
MEMORY_USETYPE_PREFIX = "memory:"
#: Its kinds, in the order recall shows them.
MEMORY_KINDS: tuple[str, ...] = ("preference", "routine", "event", "person", "fact")
#: What a search for what was remembered leaves out: what every search does, and turns.
EXCLUDED_WITH_TURNS: tuple[str, ...] = (*DEFAULT_EXCLUDED_USETYPES, *CONVERSATION_USETYPES)
#: What a search for memories leaves out: the above, and records and journal notes.
NOT_MEMORIES: tuple[str, ...] = (*EXCLUDED_WITH_TURNS, RECORD_USETYPE, JOURNAL_ENTRY_USETYPE)


def memory_kinds_filter(
    kinds: Sequence[str] | None, excluded: Sequence[str] = NOT_MEMORIES
) -> tuple[list[str] | None, list[str]]:
    """The ``(usetype, exclude_types)`` of a search for memories of ``kinds`` (None: all).

    With ``fact`` among them it is an exclusion of the other kinds, so a memory kept
    before kinds existed (no usetype: a fact) is still found; without, only those kinds.
    """
    if kinds is None or set(kinds) >= set(MEMORY_KINDS):
        return None, list(excluded)
    if "fact" in kinds:
        others = (MEMORY_USETYPE_PREFIX + k for k in MEMORY_KINDS if k not in kinds)
        return None, [*excluded, *others]
    return [MEMORY_USETYPE_PREFIX + k for k in kinds], list(excluded)


API_VERSION = "0.8.0"
#: A document of this usetype makes its subtree an append-only workspace.
WORKSPACE_USETYPE = "workspace"
#: Where a standalone server listens unless told otherwise (loopback only).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8100


#: Bounds on what one request carries besides ``content`` (the store bounds that).
MAX_TITLE_CHARS = 1_000
MAX_USETYPE_CHARS = 100
MAX_QUERY_CHARS = 10_000
MAX_LIST_ITEMS = 100
#: A JSON object field (``structured_content``, ``project``, ``weights``): characters of
#: its keys and strings plus one per value, however deeply nested.
MAX_OBJECT_WEIGHT = 1_000_000
#: How deep a JSON object field may nest (the response serializer stops at a few hundred).
MAX_OBJECT_DEPTH = 32

Title = Annotated[str, Field(max_length=MAX_TITLE_CHARS)]
Usetype = Annotated[str, Field(max_length=MAX_USETYPE_CHARS)]
Usetypes = Annotated[list[Usetype], Field(max_length=MAX_LIST_ITEMS)]
Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]

# JSON may spell a lone surrogate (``"\ud800"``); it is not text and cannot be stored.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _text_and_bounded(cls, value: Any, info: ValidationInfo) -> Any:
        """Every string is UTF-8 text; every object field is bounded (422 naming the field)."""
        weight = _weight(value)
        if isinstance(value, dict) and weight > MAX_OBJECT_WEIGHT:
            raise ValueError(
                f"{info.field_name} weighs {weight} (characters plus values), over the "
                f"limit of {MAX_OBJECT_WEIGHT}"
            )
        return value


def _weight(value: Any) -> int:
    """Characters of every string (keys too) plus one per value; refuses lone surrogates
    and nesting deeper than :data:`MAX_OBJECT_DEPTH`.

    Iterative, so no nesting depth can exhaust the stack; nested request models are
    checked by their own validators and weigh one.
    """
    weight = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        weight += 1
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise ValueError("contains a lone surrogate (\\ud800-\\udfff): not UTF-8 text")
            weight += len(item)
        elif isinstance(item, dict | list):
            if depth >= MAX_OBJECT_DEPTH:
                raise ValueError(f"nests deeper than {MAX_OBJECT_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return weight


# --- health -------------------------------------------------------------------------


class HealthResponse(BaseModel):
    """``GET /``: liveness plus what this appliance embeds with."""

    status: str
    version: str
    database: str
    embedding_model: str
    llm: str | None = None
    implementation: str = "tether-jmfts"


# --- documents ----------------------------------------------------------------------


class DocumentCreate(_Request):
    """``POST /documents``. Every write is embedded and indexed before it is acknowledged,
    whatever ``auto_embed`` says: findable-at-ack is this store's contract."""

    title: Title | None = None
    content: str | None = None
    parent_id: int | None = None
    usetype: Usetype | None = None
    structured_content: dict[str, Any] | None = None
    auto_embed: bool = True
    embed_tokens: bool = True
    auto_index_bm25: bool = True
    sequential: bool | None = None
    event_time: datetime | None = None
    supersedes: int | None = Field(
        default=None, description="Workspace only: the earlier record this one replaces."
    )


class DocumentBatch(_Request):
    """``POST /documents/batch`` (ours): many creates, one transaction, one embed batch."""

    documents: list[DocumentCreate] = Field(min_length=1, max_length=1000)


class DocumentUpdate(_Request):
    """``PATCH /documents/{id}``; omitted fields are left as they are."""

    title: Title | None = None
    content: str | None = None
    usetype: Usetype | None = None
    structured_content: dict[str, Any] | None = None
    re_embed: bool = True
    parent_id: int | None = None


class DocumentResponse(BaseModel):
    """One document, as every endpoint returns it."""

    id: int
    parent_id: int | None
    title: str | None
    content: str | None
    structured_content: dict[str, Any]
    path: list[int] = Field(
        description="Ancestor ids, root first, this document last; empty for a subtree's "
        "descendants unless the subtree was asked with paths=true."
    )
    depth: int
    usetype: str | None
    produced_by: str | None = None
    position: int | None = None
    created_at: datetime | None
    updated_at: datetime | None
    event_time: datetime | None = None
    content_hash: str | None
    settled: str = "settled"
    content_source: str = "stored"
    embed: list[float] | None = None
    author_id: int | None = None
    supersedes: int | None = None
    titled_path: str | None = Field(
        default=None,
        description="Roots only (ours): the ancestors' titles, root first (workspace/edge_asr), "
        "so that two grant roots with one title can be told apart.",
    )


class SubtreeResponse(BaseModel):
    """``GET /documents/{id}/subtree``."""

    root: DocumentResponse
    descendants: list[DocumentResponse]
    total: int


class EmbedResponse(BaseModel):
    """``POST /documents/{id}/embed``: the document's vectors were (re)computed."""

    document_id: int
    chunks: int
    dimension: int
    model: str


class DeleteResponse(BaseModel):
    """A delete's acknowledgement."""

    deleted: int
    ids: list[int]


# --- search ---------------------------------------------------------------------------

UsetypeFilter = Usetype | Usetypes


class SearchRequest(_Request):
    """``POST /search/vector`` and ``/search/fulltext`` (and ``/search/bm25``)."""

    query: Query
    limit: int = Field(default=10, ge=1, le=100)
    usetype: UsetypeFilter | None = None
    exclude_types: Usetypes | None = None
    parent_id: int | None = None
    threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    as_of: datetime | None = None
    project: dict[str, Any] | None = None
    roots: list[int] | None = Field(default=None, description="Subtree filter: any of these.")
    created_after: datetime | None = None
    created_before: datetime | None = None
    exact: bool = Field(
        default=False,
        description="Scan every vector instead of the approximate HNSW graph "
        "(small trees and narrow filters are scanned anyway).",
    )


class HybridSearchRequest(SearchRequest):
    """``POST /search/hybrid``: vector and full-text scores blended, turn and neighbours."""

    methods: Annotated[list[str], Field(max_length=MAX_LIST_ITEMS)] | None = None
    weights: dict[str, float] | None = None
    index_name: Annotated[str, Field(max_length=MAX_USETYPE_CHARS)] = "default"
    context_turns: int = Field(
        default=2,
        ge=0,
        le=5,
        description="Turns on either side of a document, in conversation order, whose "
        "scores it shares (less at each turn of distance); 0 turns this off.",
    )
    recency_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="Adds this times 0.5^(age / recency_halflife_days) to each hit's "
        "blended score (age: from the document's event time, else its creation, to "
        "`now`); 0 ranks by relevance alone.",
    )
    importance_weight: float = Field(
        default=0.0,
        description="Refused unless 0: documents carry no importance score to weigh.",
    )
    recency_halflife_days: float = Field(default=7.0, gt=0.0, le=36_525.0)
    now: datetime | None = Field(
        default=None, description="The moment ages are counted to (default: the server's clock)."
    )

    @field_validator("importance_weight")
    @classmethod
    def _no_importance(cls, value: float) -> float:
        """A weight with nothing to weigh is refused, never silently ignored."""
        if value != 0.0:
            raise ValueError("documents carry no importance score to weigh; leave it 0")
        return value


class AppliedFilters(BaseModel):
    """What the server actually ran."""

    methods: list[str] | None = None
    weights: dict[str, float] | None = None
    context_turns: int | None = None
    exclude_types: list[str] = Field(default_factory=list)
    usetype: UsetypeFilter | None = None
    parent_id: int | None = None
    roots: list[int] | None = None
    limit: int
    threshold: float | None = None
    as_of: datetime | None = None
    truncated: bool | None = None
    recency: dict[str, Any] | None = None


class SearchResultItem(BaseModel):
    """One hit: the document, its score, and what a reader needs to cite it."""

    document: DocumentResponse
    score: float
    method: str
    id: int
    path: str = Field(description="Titled path, root first: workspace/notes/x.")
    title: str | None
    snippet: str
    usetype: str | None
    created_at: datetime | None
    age: str = Field(description="Age in words, e.g. '3 weeks ago'.")
    found_by: list[str] = Field(
        default_factory=list,
        description="The scorers that found the document: vector, fulltext, and (hybrid) "
        "context when only the turns next to it were found, recency when its age "
        "weighed in.",
    )


ScoreKind = Literal["cosine", "bm25", "fused_score"]


class SearchResponse(BaseModel):
    """A page of hits. ``score_kind`` says what ``score`` means: cosine similarity,
    BM25 relevance, or (hybrid) a blend of both over a turn and its neighbours that ranks,
    not measures."""

    results: list[SearchResultItem]
    total: int
    latency_ms: float
    score_kind: ScoreKind
    applied: AppliedFilters | None = None


# --- access ---------------------------------------------------------------------------


class PrincipalCreate(_Request):
    """Create a non-owner principal."""

    name: str = Field(min_length=1, max_length=200)


class PrincipalResponse(BaseModel):
    """A principal (who grants are issued to)."""

    id: int
    name: str
    is_owner: bool
    created_at: datetime | None


class TokenCreate(_Request):
    """Mint a bearer token."""

    label: str | None = None
    expires_at: datetime | None = None


class TokenMintResponse(BaseModel):
    """The only time a raw token is shown; only its hash is stored."""

    id: int
    principal_id: int
    token: str
    label: str | None
    created_at: datetime | None
    expires_at: datetime | None


class TokenResponse(BaseModel):
    """A token's metadata, never the token."""

    id: int
    principal_id: int
    label: str | None
    created_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None = None


class GrantCreate(_Request):
    """Grant a principal read or write (write implies read) on a subtree."""

    principal_id: int
    level: Literal["read", "write"]


class GrantResponse(BaseModel):
    """A subtree grant."""

    id: int
    document_id: int
    principal_id: int
    level: str
    created_at: datetime | None


# --- triples --------------------------------------------------------------------------


class PredicateCreate(_Request):
    """Create a predicate."""

    name: str = Field(min_length=1, max_length=500)
    namespace: str | None = None
    description: str | None = None
    iri: str | None = None


class PredicateResponse(BaseModel):
    """A predicate."""

    id: int
    name: str
    namespace: str | None
    iri: str | None = None
    description: str | None
    created_at: datetime | None


class TripleCreate(_Request):
    """A fact: subject, predicate, and exactly one of an object document or a literal."""

    subject_id: int
    predicate_id: int
    object_id: int | None = None
    object_literal: str | None = None
    object_datatype: str | None = None
    source_document_id: int | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    fact_type: str = "atemporal"


class TripleSupersedRequest(TripleCreate):
    """The successor of a triple (upstream's spelling of the class name is kept)."""

    reason: str | None = None


class TripleInvalidateRequest(_Request):
    """Close a triple's record window: we no longer believe it."""

    reason: str | None = None
    superseding_triple_id: int | None = None


class TripleResponse(BaseModel):
    """A triple with both clocks: valid time (``valid_from``/``valid_until``) and record
    time (``recorded_at`` until ``invalidated_at``)."""

    id: int
    subject_id: int
    predicate_id: int
    object_id: int | None
    object_literal: str | None = None
    object_datatype: str | None = None
    derived_by: str | None = None
    source_document_id: int | None
    created_at: datetime | None
    valid_from: datetime | None
    valid_until: datetime | None
    recorded_at: datetime | None
    fact_type: str | None
    invalidated_at: datetime | None
    invalidated_by: int | None
    invalidation_reason: str | None


class TripleDetailResponse(BaseModel):
    """A triple with its subject, predicate and object expanded."""

    id: int
    subject: DocumentResponse
    predicate: PredicateResponse
    object: DocumentResponse | None
    object_literal: str | None = None
    object_datatype: str | None = None
    derived_by: str | None = None
    source_document_id: int | None
    created_at: datetime | None
    valid_from: datetime | None
    valid_until: datetime | None
    recorded_at: datetime | None
    fact_type: str | None
    invalidated_at: datetime | None
    invalidated_by: int | None
    invalidation_reason: str | None


# --- workspace ------------------------------------------------------------------------


class WorkspaceView(BaseModel):
    """The current state of an append-only workspace subtree, computed at read time:
    every record not superseded by a later one, oldest first."""

    workspace_id: int
    current: list[DocumentResponse]
    superseded: list[int]
    records: int
