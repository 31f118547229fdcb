"""Where a stored memory came from, written into the document itself. Pure.

The event log keeps a turn for 7 days; a memory lives longer. So every record a verb,
the reflex or the evaluator writes carries its own audit thread in its
``structured_content`` under ``provenance``: the turn's ``binding_id``, the agent, the
activation schema that routed the turn, the node that wrote it and, for the reflex, the
evaluation, with what the memory was written from (what was said, what recall showed) and
how. ``home memory show ID`` prints it back; ``home memory audit`` checks it again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PROVENANCE_KEY = "provenance"
_EXTRACTION_KEYS = ("said", "recalled", "extracted_by")


@dataclass(frozen=True)
class Provenance:
    """The audit thread of one written record."""

    agent: str
    written_by: str
    binding_id: str | None = None
    produced_by_schema: str | None = None
    evaluation_id: str | None = None
    # What the memory was written from (the reflex): the utterances said, the memories
    # recall showed on those turns, and how it was written ("draft" or "model"), so its
    # fidelity can be checked again later (``home memory audit``).
    said: tuple[str, ...] = ()
    recalled: tuple[str, ...] = ()
    extracted_by: str | None = None

    def structured_content(self) -> dict[str, Any]:
        """The document's ``structured_content`` carrying this thread."""
        thread = asdict(self)
        for key in _EXTRACTION_KEYS:  # only a memory the reflex wrote from words has them
            if not thread[key]:
                del thread[key]
        return {"agent": self.agent, PROVENANCE_KEY: thread}

    @classmethod
    def from_structured(cls, structured: Any) -> Provenance | None:
        """The thread a document carries, or None for a record written without one."""
        if not isinstance(structured, dict):
            return None
        raw = structured.get(PROVENANCE_KEY)
        if not isinstance(raw, dict):
            return None
        agent, written_by = raw.get("agent"), raw.get("written_by")
        if not isinstance(agent, str) or not isinstance(written_by, str):
            return None

        def text(key: str) -> str | None:
            value = raw.get(key)
            return value if isinstance(value, str) else None

        def texts(key: str) -> tuple[str, ...]:
            value = raw.get(key)
            if not isinstance(value, list):
                return ()
            return tuple(v for v in value if isinstance(v, str))

        return cls(
            agent=agent,
            written_by=written_by,
            binding_id=text("binding_id"),
            produced_by_schema=text("produced_by_schema"),
            evaluation_id=text("evaluation_id"),
            said=texts("said"),
            recalled=texts("recalled"),
            extracted_by=text("extracted_by"),
        )
