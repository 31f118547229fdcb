"""``home memory forget ID``: stop believing one memory, by hand.

In a workspace (append-only, where the reflex keeps its memories) the memory is retracted:
a record of usetype ``retraction`` supersedes it, so search and recall leave it out from
now on and ``--as-of`` a time before still finds it (bitemporal). Outside a workspace
there is no history to keep and the document is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from home.jmfts.client import SyncJmftsClient
from home.jmfts.errors import InvalidInput
from home.jmfts.models import RETRACTION_USETYPE


@dataclass(frozen=True)
class Forgotten:
    """What ``forget`` did to one memory."""

    id: int
    action: Literal["retracted", "deleted"]
    retraction_id: int | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {"id": self.id, "action": self.action, "retraction_id": self.retraction_id}


def forget(
    client: SyncJmftsClient,
    doc_id: int,
    reason: str = "forgotten by hand",
    *,
    structured_content: dict[str, Any] | None = None,
) -> Forgotten:
    """Retract (workspace) or delete (elsewhere) document ``doc_id``; JMFTS errors propagate.

    ``structured_content`` goes on the retraction: who forgot it, in which turn
    (:class:`~home.memory.provenance.Provenance`), so ``home memory show`` tells it."""
    doc = client.request("GET", f"/documents/{doc_id}")
    body: dict[str, Any] = {
        "parent_id": doc["parent_id"],
        "content": reason,
        "usetype": RETRACTION_USETYPE,
        "supersedes": doc_id,
    }
    if structured_content is not None:
        body["structured_content"] = structured_content
    try:
        retraction = client.request("POST", "/documents", json=body)
    except InvalidInput:  # not in a workspace: nothing to supersede with
        client.request("DELETE", f"/documents/{doc_id}")
        return Forgotten(doc_id, "deleted")
    return Forgotten(doc_id, "retracted", int(retraction["id"]))


def retractions_of(client: SyncJmftsClient, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The retractions that supersede document ``doc`` (its siblings of usetype
    ``retraction``), oldest first."""
    if doc.get("parent_id") is None:
        return []
    siblings = client.request(
        "GET",
        "/documents",
        params={"parent_id": doc["parent_id"], "usetype": RETRACTION_USETYPE, "limit": 1000},
    )
    return [r for r in siblings or [] if r.get("supersedes") == doc["id"]]


@dataclass(frozen=True)
class Restored:
    """A forgotten memory written again: the new record, and the retraction it undoes."""

    id: int
    restored_id: int
    retraction_id: int

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {"id": self.id, "restored_id": self.restored_id, "retraction_id": self.retraction_id}


def restore(client: SyncJmftsClient, doc_id: int) -> Restored:
    """Undo the last retraction of ``doc_id``: its words are written again as a new record
    that supersedes the retraction (the workspace is append-only, so the memory comes back
    with a new id and both steps stay on record). :class:`InvalidInput` when it was never
    retracted."""
    doc = client.request("GET", f"/documents/{doc_id}")
    retractions = retractions_of(client, doc)
    if not retractions:
        raise InvalidInput(f"memory #{doc_id} was not forgotten: nothing to restore")
    retraction = retractions[-1]
    body: dict[str, Any] = {
        "parent_id": doc["parent_id"],
        "content": doc.get("content"),
        "supersedes": retraction["id"],
    }
    if doc.get("structured_content") is not None:
        body["structured_content"] = doc["structured_content"]
    written = client.request("POST", "/documents", json=body)
    return Restored(doc_id, int(written["id"]), int(retraction["id"]))
