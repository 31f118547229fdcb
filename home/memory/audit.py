"""``home memory audit``: the stored memories that fail today's fidelity check. Pure.

Each memory the reflex writes names what it was written from in its provenance
(:mod:`home.memory.provenance`: what was said, what recall showed). A memory written
before it did is checked against its turn's words, found by the turn's ``binding_id`` in
the agent's turn ledger (``DATA_DIR/agents/AGENT/turns.jsonl``). One with neither is
*unverifiable*: listed, never retracted. Records the reflex did not write (a model's
``jmfts_write`` record, a note) are not memories of what was said and are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from home.memory.fidelity import check
from home.memory.provenance import Provenance

REFLEX_WRITER_SUFFIX = ".memory_reflex"
Verdict = Literal["faithful", "invented", "unverifiable"]


@dataclass(frozen=True)
class AuditedMemory:
    """One memory checked: what it says, what it was checked against, what nobody said."""

    id: int
    content: str
    verdict: Verdict
    sources: tuple[str, ...]
    invented: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "id": self.id,
            "content": self.content,
            "verdict": self.verdict,
            "sources": list(self.sources),
            "invented": list(self.invented),
        }

    def retraction_reason(self) -> str:
        """What the retraction record says of why."""
        return (
            f"home memory audit: words nobody said ({', '.join(self.invented)}); "
            f"checked against: {' | '.join(self.sources)}"
        )


def is_reflex_memory(provenance: Provenance | None) -> bool:
    """Whether the record is a memory the reflex wrote (or one with no thread at all)."""
    return provenance is None or provenance.written_by.endswith(REFLEX_WRITER_SUFFIX)


def audit_memory(
    doc_id: int, content: str, provenance: Provenance | None, turns: Mapping[str, str]
) -> AuditedMemory:
    """Check one memory against what it was written from (or its turn's words)."""
    sources: tuple[str, ...] = ()
    if provenance is not None and provenance.said:
        sources = (*provenance.said, *provenance.recalled)
    elif provenance is not None and provenance.binding_id in turns:
        sources = (turns[provenance.binding_id or ""],)
    if not sources:
        return AuditedMemory(doc_id, content, "unverifiable", ())
    fidelity = check(content, sources)
    verdict: Verdict = "faithful" if fidelity.faithful else "invented"
    return AuditedMemory(doc_id, content, verdict, sources, fidelity.invented)


def audit(
    memories: Iterable[tuple[int, str, Provenance | None]], turns: Mapping[str, str]
) -> list[AuditedMemory]:
    """Every reflex memory among ``memories`` (id, content, provenance), checked, in order."""
    return [
        audit_memory(doc_id, content, provenance, turns)
        for doc_id, content, provenance in memories
        if is_reflex_memory(provenance)
    ]
