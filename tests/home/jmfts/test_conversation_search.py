"""Hybrid search on a conversation: the turn after a hit shares its score (the answer
often follows the turn that names the topic), never past the request's filters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from home.jmfts.access import Principal
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.models import DocumentCreate, HybridSearchRequest
from home.jmfts.search import fts_query, search
from home.jmfts.store import DocumentStore

ADMIN = Principal(id=1, name="admin", is_owner=True)
TURNS = (
    ("user", "How was your weekend?"),
    ("assistant", "Quiet, mostly chores."),
    ("user", "My sister is relocating for work, can you believe it."),
    ("assistant", "Oh wow, where to?"),
    ("user", "To Lisbon, of all places!"),
)


@pytest.fixture
def store(tmp_path: Path, embedder: OnnxMiniLM) -> Iterator[DocumentStore]:
    store = DocumentStore(tmp_path / "data", embedder)
    try:
        yield store
    finally:
        store.close()


def _session(store: DocumentStore, turns: tuple[tuple[str, str], ...]) -> list[int]:
    parent = store.create(ADMIN, DocumentCreate(title="session", sequential=True)).id
    return [
        store.create(ADMIN, DocumentCreate(parent_id=parent, title=who, content=text)).id
        for who, text in turns
    ]


def _hybrid(store: DocumentStore, query: str, **extra: int) -> list[int]:
    request = HybridSearchRequest(query=query, limit=3, **extra)  # type: ignore[arg-type]
    return [r.id for r in search(store, ADMIN, "hybrid", request).results]


def test_the_answer_turn_after_the_topic_turn_is_found(store: DocumentStore) -> None:
    ids = _session(store, TURNS)
    assert ids[4] in _hybrid(store, "Which city did my sister move to?")


def test_following_turns_outside_the_filter_never_appear(store: DocumentStore) -> None:
    ids = _session(store, TURNS[:3])
    parent = store.row(ids[0])["parent_id"]
    summary = store.create(
        ADMIN,
        DocumentCreate(parent_id=parent, title="note", content="Lisbon", usetype="summary"),
    ).id
    found = _hybrid(store, "my sister relocating for work", context_turns=2)
    assert ids[2] in found
    assert summary not in found  # summaries are excluded by default, neighbour or not


def test_context_turns_zero_turns_spreading_off(store: DocumentStore) -> None:
    _session(store, TURNS)
    response = search(
        store, ADMIN, "hybrid", HybridSearchRequest(query="sister relocating", context_turns=0)
    )
    assert response.applied.context_turns == 0


def test_stopwords_leave_the_fulltext_query_unless_nothing_else_is_left() -> None:
    assert fts_query("What is my sister allergic to?") == '"sister" OR "allergic"'
    assert fts_query("who is it") == '"who" OR "is" OR "it"'
