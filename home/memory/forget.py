"""``home memory forget ID``: stop believing one memory, by hand.

In a workspace (append-only, where the reflex keeps its memories) the memory is retracted:
a record of usetype ``retraction`` supersedes it, so search and recall leave it out from
now on and ``--as-of`` a time before still finds it (bitemporal). Outside a workspace
there is no history to keep and the document is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


def forget(client: SyncJmftsClient, doc_id: int, reason: str = "forgotten by hand") -> Forgotten:
    """Retract (workspace) or delete (elsewhere) document ``doc_id``; JMFTS errors propagate."""
    doc = client.request("GET", f"/documents/{doc_id}")
    body = {
        "parent_id": doc["parent_id"],
        "content": reason,
        "usetype": RETRACTION_USETYPE,
        "supersedes": doc_id,
    }
    try:
        retraction = client.request("POST", "/documents", json=body)
    except InvalidInput:  # not in a workspace: nothing to supersede with
        client.request("DELETE", f"/documents/{doc_id}")
        return Forgotten(doc_id, "deleted")
    return Forgotten(doc_id, "retracted", int(retraction["id"]))
