"""A verb from the model to a document in a real JMFTS: τ, the verbs extension, the effector."""

from __future__ import annotations

import asyncio
from pathlib import Path

from home.agents.agent_node import AgentNode
from home.effectors.effector import Effector
from home.effectors.journal_append import SPEC as JOURNAL_APPEND
from home.jmfts.client import JmftsClient
from home.jmfts.testing import RunningJmfts
from home.llm.endpoint import ModelEndpoint
from shared.schema.catalog import NodeCatalog
from tests.support.home_fixtures import REPO_ROOT, EdgeSide
from tests.support.scripted_model import Reply, ScriptedModel, content_text


async def test_journal_append_lands_in_jmfts_under_the_agents_principal_and_never_the_token(
    catalog: NodeCatalog,
    nats_url: str,
    model: ScriptedModel,
    edge: EdgeSide,
    tmp_path: Path,
    jmfts: RunningJmfts,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    token = await jmfts.principal("edge_asr", ["journal/edge_asr", "workspace/edge_asr"])
    (tokens / "edge_asr.token").write_text(token)
    model.script(
        Reply.call("journal_append", {"text": "the user asked about the kettle"}),
        Reply.call("speak", {"text": "Noted."}),
    )
    async with (
        Effector(JOURNAL_APPEND, nats_url=nats_url, jmfts_url=jmfts.url, token_dir=tokens),
        AgentNode(
            catalog["agent.edge_asr"],
            nats_url=nats_url,
            data_dir=tmp_path / "node",
            model=ModelEndpoint(base_url=model.url),
            repo_root=REPO_ROOT,
            jmfts_url=jmfts.url,
            jmfts_token_file=tokens / "edge_asr.token",
        ) as node,
    ):
        await edge.say("remember the kettle", received=lambda: node.stats.received)
        async with asyncio.timeout(60):
            while not node.stats.outcomes:
                await asyncio.sleep(0.02)

    (ack,) = [e for e in edge.seen if e.subject.startswith("events.journal.append.")]
    assert ack.event.payload["ok"] is True, ack.event.payload
    tool_result = [
        content_text(m.get("content")) for m in model.requests[1].messages if m["role"] == "tool"
    ]
    assert tool_result == ["Noted in your journal."]
    async with JmftsClient(jmfts.url, token=token) as as_agent:
        doc = await as_agent.get(ack.event.payload["doc_id"])
        parent = await as_agent.get(doc.parent_id or -1)
    assert doc.content == "the user asked about the kettle"
    assert parent.title == "edge_asr"
    for request in model.requests:
        assert token.encode() not in request.raw
    assert token.encode() not in edge.all_raw()
