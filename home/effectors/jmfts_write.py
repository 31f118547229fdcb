"""``effector.jmfts_write``: a durable record into the agent's workspace, ``workspace/<agent>``.

Run: ``python -m home.effectors.jmfts_write --nats URL --jmfts-url URL --token-dir DIR``.
Acks on ``events.journal.jmfts_write.<binding_id>`` with ``ok`` and the ``doc_id``.
"""

from __future__ import annotations

from typing import Any

from home.effectors.cli import make_app
from home.effectors.effector import VerbEffector, verb_request
from home.jmfts.client import JmftsClient
from home.jmfts.models import RECORD_USETYPE
from home.memory.provenance import Provenance
from shared.subjects import jmfts_write_ack_subject

WORKSPACE_ROOT = "workspace"
USETYPE = RECORD_USETYPE


async def write_record(client: JmftsClient, origin: Provenance, payload: dict[str, Any]) -> int:
    """Write one record under ``workspace/<agent>`` as the agent; return its document id."""
    request = verb_request(payload)
    text = request.text.strip()
    agent = origin.agent
    parent = await client.ensure(f"{WORKSPACE_ROOT}/{agent}")
    doc = await client.create(
        title=request.title or text[:80],
        content=text,
        parent_id=parent.id,
        usetype=USETYPE,
        structured_content=origin.structured_content(),
    )
    return doc.id


SPEC = VerbEffector(
    node="effector.jmfts_write",
    verb="jmfts_write",
    ack_subject=jmfts_write_ack_subject,
    write=write_record,
)

app = make_app(SPEC)

if __name__ == "__main__":
    app()
