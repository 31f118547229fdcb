"""``effector.journal_append``: an agent's note into its journal subtree, ``journal/<agent>``.

Run: ``python -m home.effectors.journal_append --nats URL --jmfts-url URL --token-dir DIR``.
Acks on ``events.journal.append.<binding_id>`` with ``ok`` and the ``doc_id``.
"""

from __future__ import annotations

from typing import Any

from home.effectors.cli import make_app
from home.effectors.effector import VerbEffector, note_text
from home.jmfts.client import JmftsClient
from home.jmfts.models import JOURNAL_ENTRY_USETYPE
from home.memory.provenance import Provenance
from shared.subjects import journal_append_ack_subject

JOURNAL_ROOT = "journal"
USETYPE = JOURNAL_ENTRY_USETYPE


async def append_note(client: JmftsClient, origin: Provenance, payload: dict[str, Any]) -> int:
    """Write one note under ``journal/<agent>`` as the agent; return its document id."""
    text = note_text(payload)
    agent = origin.agent
    parent = await client.ensure(f"{JOURNAL_ROOT}/{agent}")
    doc = await client.create(
        title=text[:80],
        content=text,
        parent_id=parent.id,
        usetype=USETYPE,
        structured_content=origin.structured_content(),
    )
    return doc.id


SPEC = VerbEffector(
    node="effector.journal_append",
    verb="journal_append",
    ack_subject=journal_append_ack_subject,
    write=append_note,
)

app = make_app(SPEC)

if __name__ == "__main__":
    app()
