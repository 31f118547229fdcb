"""``home memory show ID``: one memory and where it came from (its audit thread).

The thread is the record's own ``provenance`` (:mod:`home.memory.provenance`): the turn's
``binding_id``, the agent, the schema, the node that wrote it and the evaluation. With the
binding id, ``home trace BINDING`` shows the turn while the event log still holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from home.jmfts.client import SyncJmftsClient
from home.memory.forget import retractions_of
from home.memory.kinds import USETYPE_PREFIX, usetype_kind
from home.memory.provenance import Provenance


@dataclass(frozen=True)
class Retraction:
    """One retraction of a memory: its id, when, why, and the turn that asked for it."""

    id: int
    created_at: str | None
    content: str
    binding_id: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "content": self.content,
            "binding_id": self.binding_id,
        }


@dataclass(frozen=True)
class MemoryOrigin:
    """One stored memory with its audit thread (None: written without one)."""

    id: int
    content: str
    created_at: str | None
    usetype: str | None
    supersedes: int | None
    provenance: Provenance | None
    # The retractions that forgot it (by hand or by voice): id, when, why, which turn.
    retracted_by: tuple[Retraction, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        thread = self.provenance
        return {
            "id": self.id,
            "content": self.content,
            "created_at": self.created_at,
            "usetype": self.usetype,
            "supersedes": self.supersedes,
            "provenance": None if thread is None else thread.structured_content()["provenance"],
            "retracted_by": [r.to_dict() for r in self.retracted_by],
        }

    def lines(self) -> list[str]:
        """The origin in words, one fact a line."""
        out = [f"#{self.id}: {self.content}", f"written {self.created_at or 'at an unknown time'}"]
        if (self.usetype or "").startswith(USETYPE_PREFIX):
            out.append(f"a {usetype_kind(self.usetype)}")
        if self.supersedes is not None:
            out.append(f"replaces #{self.supersedes}")
        for r in self.retracted_by:
            turn = f", turn {r.binding_id}" if r.binding_id else ""
            out.append(f"forgotten: retracted by #{r.id} at {r.created_at} ({r.content}{turn})")
        thread = self.provenance
        if thread is None:
            out.append("no provenance: written before memories carried their audit thread")
            return out
        out.append(f"agent {thread.agent}, written by {thread.written_by}")
        out.append(f"schema {thread.produced_by_schema or '(none named)'}")
        if thread.binding_id is not None:
            out.append(f"turn {thread.binding_id} (home trace {thread.binding_id})")
        if thread.evaluation_id is not None:
            out.append(f"evaluation {thread.evaluation_id}")
        if thread.extracted_by is not None:
            out.append(f"written as a {thread.extracted_by} from: " + " | ".join(thread.said))
        if thread.recalled:
            out.append("with recall showing: " + " | ".join(thread.recalled))
        return out


def memory_origin(client: SyncJmftsClient, doc_id: int) -> MemoryOrigin:
    """Read document ``doc_id`` and its audit thread; JMFTS errors propagate."""
    doc = client.request("GET", f"/documents/{doc_id}")
    return MemoryOrigin(
        id=int(doc["id"]),
        content=doc.get("content") or doc.get("title") or "",
        created_at=doc.get("created_at"),
        usetype=doc.get("usetype"),
        supersedes=doc.get("supersedes"),
        provenance=Provenance.from_structured(doc.get("structured_content")),
        retracted_by=tuple(_retraction(r) for r in retractions_of(client, doc)),
    )


def _retraction(doc: dict[str, Any]) -> Retraction:
    thread = Provenance.from_structured(doc.get("structured_content"))
    return Retraction(
        id=int(doc["id"]),
        created_at=doc.get("created_at"),
        content=str(doc.get("content") or ""),
        binding_id=thread.binding_id if thread is not None else None,
    )
