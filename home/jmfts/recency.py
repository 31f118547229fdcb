"""Hybrid search's recency term (docs/architecture.md "Memory"): a document's age, counted
to a given moment, raises its blended score by a weight that halves every half-life."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from home.jmfts.clock import from_stored
from home.jmfts.store import DocumentStore


class Scored(Protocol):
    """A search hit as blended: its document, its score, and the scorers that found it."""

    doc_id: int
    score: float
    found_by: list[str]


H = TypeVar("H", bound=Scored)


@dataclass(frozen=True)
class Recency:
    """Hybrid search's recency term: ``weight`` x 0.5^(age / ``halflife_days``) added to
    each candidate's blended score, its age counted from its event time (else its
    creation) to ``now``; a document dated after ``now`` counts as new."""

    weight: float
    halflife_days: float
    now: datetime

    def weigh(self, store: DocumentStore, hits: list[H]) -> list[H]:
        """``hits`` with the term added, best first again."""
        if not hits:
            return hits
        marks = ",".join("?" * len(hits))
        with store.lock:
            dated = {
                r[0]: from_stored(r[1])
                for r in store.conn.execute(
                    f"SELECT id, COALESCE(event_time, created_at) FROM documents"
                    f" WHERE id IN ({marks})",
                    [h.doc_id for h in hits],
                )
            }
        for hit in hits:
            moment = dated.get(hit.doc_id)
            if moment is None:
                continue
            age_days = max((self.now - moment).total_seconds(), 0.0) / 86400
            hit.score += self.weight * 0.5 ** (age_days / self.halflife_days)
            hit.found_by.append("recency")
        return sorted(hits, key=lambda h: -h.score)

    def applied(self) -> dict[str, Any]:
        """What the search says it ran."""
        return {
            "weight": self.weight,
            "halflife_days": self.halflife_days,
            "now": self.now.isoformat(),
        }
