"""The reflex end to end: real JMFTS, real nats-server, real τ, scripted model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from home.jmfts.testing import RunningJmfts
from shared.schema.catalog import NodeCatalog
from tests.home.memory.conftest import (
    AGENT,
    Brain,
    Converse,
    reflex_spec,
    session_entries,
    user_texts,
)

ROOT = f"workspace/{AGENT}"


async def test_recalled_memories_precede_the_utterance_oldest_first_with_ages(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, [ROOT])
    now = datetime.now(UTC)
    newer = await jmfts.write(
        ROOT, "The user's sister Alice moved to Lisbon.", event_time=now - timedelta(days=2)
    )
    older = await jmfts.write(
        ROOT, "The user's sister is called Alice.", event_time=now - timedelta(days=21)
    )
    spec = reflex_spec(catalog, every_n=0, threshold=0.3)
    async with converse(spec, token) as (edge, node):
        said = await edge.say("where does my sister Alice live now")
        await edge.wait_for("speak.tui")
        recalls = await edge.wait_for("recall.tui")
        entries = await session_entries(node, "memory_recall")

    (turn,) = brain.turns
    texts = user_texts(turn)
    assert texts[-1] == "where does my sister Alice live now"
    recalled = texts[-2]
    assert "3 weeks ago" in recalled and "2 days ago" in recalled
    assert recalled.index("called Alice") < recalled.index("moved to Lisbon"), "oldest first"
    (report,) = recalls
    assert report.event.binding_id == said.binding_id
    assert report.subject == f"events.workspace.{AGENT}.out.recall.tui"
    assert set(report.event.payload["injected_ids"]) == {older, newer}
    assert report.event.payload["passed"] == 2
    (entry,) = entries
    assert entry["data"]["query"] == "where does my sister Alice live now"
    assert entry["data"]["passed"] == 2


async def test_a_search_below_the_threshold_injects_nothing_but_is_recorded(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, [ROOT])
    stored = await jmfts.write(ROOT, "The user's bicycle is a green Brompton.")
    spec = reflex_spec(catalog, every_n=0, threshold=0.45)
    async with converse(spec, token) as (edge, node):
        await edge.say("what is the capital of Mongolia")
        await edge.wait_for("speak.tui")
        (report,) = await edge.wait_for("recall.tui")
        (entry,) = await session_entries(node, "memory_recall")

    (turn,) = brain.turns
    assert user_texts(turn) == ["what is the capital of Mongolia"], "nothing threaded in"
    assert not any(
        "Brompton" in m.get("content", "")
        for m in turn.messages
        if isinstance(m.get("content"), str)
    )
    data = entry["data"]
    assert data["passed"] == 0 and data["injected_ids"] == []
    (hit,) = data["hits"]
    assert hit["id"] == stored and 0.0 < hit["score"] < 0.45 and hit["passed"] is False
    assert report.event.payload["scores"] == [hit["score"]]
    assert report.event.payload["document_ids"] == [stored]
    assert report.event.payload["passed"] == 0


async def test_a_correction_stored_beside_what_it_corrects_is_shown_with_it(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    """Said too far from the memory it corrects to be linked when written, a correction
    is shown with it, and ranked above it, though its own cosine is under the gate."""
    token = await jmfts.principal(AGENT, [ROOT])
    now = datetime.now(UTC)
    old = await jmfts.write(
        ROOT,
        "The user is on ramipril for the user's blood pressure.",
        event_time=now - timedelta(days=60),
    )
    new = await jmfts.write(
        ROOT,
        "The gp's taken the user off ramipril and put the user on amlodipine instead.",
        event_time=now - timedelta(days=10),
    )
    await jmfts.write(ROOT, "The user's bicycle is a green Brompton.")
    spec = reflex_spec(catalog, every_n=0, threshold=0.3)
    async with converse(spec, token) as (edge, _node):
        await edge.say("what medication am i on")
        await edge.wait_for("speak.tui")
        (report,) = await edge.wait_for("recall.tui")

    recalled = user_texts(brain.turns[0])[-2]
    assert "ramipril for" in recalled and "amlodipine instead" in recalled
    payload = report.event.payload
    assert set(payload["injected_ids"]) == {old, new}
    scores = dict(zip(payload["document_ids"], payload["scores"], strict=True))
    ranked = payload["document_ids"]
    assert ranked.index(new) < ranked.index(old), "the correction ranks first"
    assert scores[new] >= scores[old]
