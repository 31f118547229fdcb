"""Hybrid search on a conversation: the turns around a hit share its score (the answer
is often a turn or two from the one that names the topic), whether the turns are
siblings under a session or τ's chain of entries, never past the request's filters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from home.jmfts.access import Principal
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.models import DocumentCreate, HybridSearchRequest, SearchRequest
from home.jmfts.search import Neighbours, build_filter, conversation_neighbours, fts_query, search
from home.jmfts.store import DocumentStore

ADMIN = Principal(id=1, name="admin", is_owner=True)
Turns = tuple[tuple[str, str], ...]
TURNS: Turns = (
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


def _session(store: DocumentStore, turns: Turns) -> list[int]:
    parent = store.create(ADMIN, DocumentCreate(title="session", sequential=True)).id
    return [
        store.create(ADMIN, DocumentCreate(parent_id=parent, title=who, content=text)).id
        for who, text in turns
    ]


def _chain(store: DocumentStore, turns: Turns) -> list[int]:
    """Turns as τ stores them: each entry filed under the one before, below a root."""
    root = DocumentCreate(title="tau:conversation 1", usetype="tau:conversation")
    previous = store.create(ADMIN, root).id
    ids = []
    for seq, (who, text) in enumerate(turns, start=1):
        entry = DocumentCreate(
            parent_id=previous,
            title=f"{who} — {seq:04d}",
            content=text,
            usetype="tau:message",
            sequential=True,
        )
        previous = store.create(ADMIN, entry).id
        ids.append(previous)
    return ids


def _neighbours(store: DocumentStore, ids: list[int]) -> dict[int, Neighbours]:
    return conversation_neighbours(store, build_filter(store, ADMIN, SearchRequest(query="-")), ids)


def _hybrid(store: DocumentStore, query: str, **extra: int) -> list[int]:
    request = HybridSearchRequest(query=query, limit=3, **extra)  # type: ignore[arg-type]
    return [r.id for r in search(store, ADMIN, "hybrid", request).results]


@pytest.mark.parametrize("layout", [_session, _chain])
def test_the_turns_around_a_hit_share_its_score(
    store: DocumentStore, layout: Callable[[DocumentStore, Turns], list[int]]
) -> None:
    ids = layout(store, TURNS)
    found = _hybrid(store, "my sister relocating for work", context_turns=1)
    assert found[0] == ids[2]
    assert set(found[1:3]) == {ids[1], ids[3]}


@pytest.mark.parametrize("layout", [_session, _chain])
def test_neighbours_are_the_turns_before_and_after_in_either_layout(
    store: DocumentStore, layout: Callable[[DocumentStore, Turns], list[int]]
) -> None:
    ids = layout(store, TURNS[:3])
    found = _neighbours(store, ids)
    assert found[ids[0]] == Neighbours(None, ids[1])  # a session or root holds no turn
    assert found[ids[1]] == Neighbours(ids[0], ids[2])
    assert found[ids[2]] == Neighbours(ids[1], None)


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
