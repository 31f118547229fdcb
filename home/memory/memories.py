"""The reflex's memories in JMFTS: resolve a root, vector-search it, deposit and supersede.

A thin layer over the one client (:class:`home.jmfts.client.JmftsClient`) as the agent's
own principal: what the agent was not granted answers 404, so it is absent here too.
Searches go through ``/search/vector`` (a real cosine score, which a gate can trust).
JMFTS failures arrive as :class:`home.jmfts.errors.JmftsError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from home.jmfts.client import DEFAULT_TIMEOUT_S, JmftsClient
from home.jmfts.errors import JmftsError, MalformedAnswer
from home.jmfts.models import RETRACTION_USETYPE, memory_kinds_filter
from home.memory.kinds import MemoryKind, kind_usetype, usetype_kind
from home.memory.provenance import Provenance
from shared.lifecycle import Service


@dataclass(frozen=True)
class StoredMemory:
    """One document as the reflex reads it: a search hit or a written record."""

    id: int
    content: str
    written_at: datetime
    parent_id: int | None = None
    score: float = 0.0
    age: str = ""
    path: str = ""
    usetype: str | None = None

    @property
    def kind(self) -> MemoryKind:
        """What kind of memory it is (:mod:`home.memory.kinds`; none stored: a fact)."""
        return usetype_kind(self.usetype)

    @classmethod
    def from_document(
        cls, doc: Any, *, score: float = 0.0, age: str = "", path: str = ""
    ) -> StoredMemory:
        """Parse a JMFTS ``DocumentResponse``; a malformed one is a MalformedAnswer."""
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), int):
            raise MalformedAnswer(f"JMFTS answered with something not a document: {doc!r:.200}")
        stamp = doc.get("event_time") or doc.get("created_at")
        written = datetime.fromisoformat(stamp) if isinstance(stamp, str) else datetime.now(UTC)
        if written.tzinfo is None:
            written = written.replace(tzinfo=UTC)
        content = doc.get("content")
        return cls(
            id=doc["id"],
            content=content if isinstance(content, str) else (doc.get("title") or ""),
            written_at=written,
            parent_id=doc.get("parent_id"),
            score=score,
            age=age,
            path=path,
            usetype=doc.get("usetype") if isinstance(doc.get("usetype"), str) else None,
        )


class MemoryStore(Service):
    """The reflex's memories as one principal. ``async with MemoryStore(url, token=...)``."""

    def __init__(self, base_url: str, *, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.client = JmftsClient(base_url, token=token, timeout_s=timeout_s)
        self._resolved: dict[str, int] = {}

    async def close(self) -> None:
        """Close the client's connection pool."""
        await self.client.close()

    async def resolve(self, path: str) -> int:
        """The id of the document at a titled path (``workspace/x``) or ``#id``, remembered.

        Absent or not granted is a 404 :class:`~home.jmfts.errors.NotFound`.
        """
        cached = self._resolved.get(path)
        if cached is None:
            cached = self._resolved[path] = (await self.client.resolve(path)).id
        return cached

    async def get(self, memory_id: int) -> StoredMemory:
        """One memory by id (a 404 :class:`~home.jmfts.errors.NotFound` when not visible)."""
        return StoredMemory.from_document((await self.client.get(memory_id)).data)

    async def vector_search(
        self,
        query: str,
        root_id: int,
        limit: int,
        kinds: tuple[MemoryKind, ...] | None = None,
    ) -> list[StoredMemory]:
        """Top ``limit`` memories under ``root_id`` by cosine score, ungated (threshold 0),
        of ``kinds`` (default: every kind).

        Only memories: a record the model wrote (``jmfts_write``), a journal note and a
        conversation's own turns share the agent's subtrees but are not facts about the
        user, and are never recalled, deduplicated against or corrected as one."""
        usetype, excluded = memory_kinds_filter(kinds)
        answer = await self.client.search(
            query,
            "vector",
            limit,
            roots=[root_id],
            threshold=0.0,
            usetype=usetype,
            exclude_types=excluded,
        )
        if answer.get("score_kind") != "cosine":
            raise MalformedAnswer(f"JMFTS POST /search/vector: not cosine scores: {answer!r:.200}")
        hits = []
        for item in answer.get("results", []):
            if item.get("id") == root_id:
                continue  # the root itself is a container, not a memory
            hits.append(
                StoredMemory.from_document(
                    item.get("document"),
                    score=float(item.get("score", 0.0)),
                    age=str(item.get("age", "")),
                    path=str(item.get("path", "")),
                )
            )
        return hits

    async def retract(self, memory: StoredMemory, reason: str, origin: Provenance) -> int:
        """Stop believing ``memory``: a retraction that supersedes it, saying ``reason``,
        with ``origin``'s provenance (who retracted it, in which turn); its id."""
        retraction = await self.client.create(
            title=None,
            content=reason,
            parent_id=memory.parent_id,
            usetype=RETRACTION_USETYPE,
            structured_content=origin.structured_content(),
            supersedes=memory.id,
        )
        return retraction.id

    async def deposit(
        self,
        parent_id: int,
        text: str,
        *,
        supersedes: int | None = None,
        origin: Provenance | None = None,
        event_time: datetime | None = None,
        kind: MemoryKind = "fact",
        about: str | None = None,
    ) -> StoredMemory:
        """Write one memory of ``kind`` under ``parent_id`` (findable when this returns).

        With ``supersedes`` in a workspace (append-only) a new record replaces the old;
        elsewhere the old document is updated in place. ``origin`` is written into the
        record (its audit thread); ``event_time`` is when it was said. ``about`` (who the
        memory is about, when its words name them by neither name nor relation: "he") is
        its title: it is searched with the words, never shown as them.
        """
        structured = origin.structured_content() if origin is not None else None
        try:
            doc = await self.client.create(
                title=about,
                content=text,
                parent_id=parent_id,
                usetype=kind_usetype(kind),
                structured_content=structured,
                supersedes=supersedes,
                event_time=None if event_time is None else event_time.isoformat(),
            )
        except JmftsError as exc:
            if supersedes is None or exc.status != 400:
                raise
            # Outside a workspace there is no supersession: update the memory in place.
            changes: dict[str, Any] = {
                "content": text,
                "usetype": kind_usetype(kind),
                "title": about,
            }
            if event_time is not None:
                changes["event_time"] = event_time.isoformat()
            if structured is not None:
                changes["structured_content"] = structured
            doc = await self.client.update(supersedes, changes)
        return StoredMemory.from_document(doc.data)
