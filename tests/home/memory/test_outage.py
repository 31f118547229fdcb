"""Issue 17's outage line: with JMFTS stopped, the model is told memory is unavailable and
the recall report names the root that failed and why (real τ, real JMFTS, scripted model)."""

from __future__ import annotations

from home.jmfts.testing import RunningJmfts
from home.memory.recall import MEMORY_UNAVAILABLE, RECALL_HEADER
from shared.schema.catalog import NodeCatalog
from tests.home.memory.conftest import AGENT, Brain, Converse, reflex_spec, user_texts

ROOT = f"workspace/{AGENT}"


async def test_with_jmfts_stopped_the_model_hears_memory_is_unavailable(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, [ROOT])
    await jmfts.write(ROOT, "The user's dog is called Biscuit.")
    spec = reflex_spec(catalog, every_n=0, search_timeout_s=2.0)
    async with converse(spec, token) as (edge, _):
        await edge.say("what is my dog called")
        await edge.wait_for("speak.tui")
        (served,) = await edge.wait_for("recall.tui")
        await jmfts.server.close()  # the memory server goes away between two turns
        asked = await edge.say("what is my dog called again")
        await edge.wait_for("speak.tui", count=2)
        reports = await edge.wait_for("recall.tui", count=2)

    assert served.event.payload["failed_roots"] == [], served.event.payload
    first, second = brain.turns
    assert RECALL_HEADER in user_texts(first)[-2] and "Biscuit" in user_texts(first)[-2]
    told = user_texts(second)
    assert told[-1] == "what is my dog called again"
    assert MEMORY_UNAVAILABLE in told[-2] and "Biscuit" not in told[-2], told
    (report,) = [r for r in reports if r.event.binding_id == asked.binding_id]
    assert report.event.payload["failed_roots"] == [ROOT], report.event.payload
    (error,) = report.event.payload["errors"]
    assert error.startswith(f"{ROOT}: ") and len(error) > len(ROOT) + 2, error
    assert report.event.payload["injected_ids"] == []
