"""Memory with an owner: two agents, two principals; a granted read, an ungranted one."""

from __future__ import annotations

from pathlib import Path

import pytest

from home.jmfts.errors import JmftsError
from home.jmfts.testing import RunningJmfts
from home.memory.config import parse_config
from home.memory.extract import Extracted
from home.memory.fsrs import ReviewBook
from home.memory.memories import MemoryStore
from home.memory.reflex import Depositor, Recaller
from shared.schema.catalog import NodeCatalog
from tests.home.memory.conftest import Brain, edge_for, memory_agent, reflex_spec

A, B = "mem_a", "mem_b"
ROOT_A, ROOT_B = f"workspace/{A}", f"workspace/{B}"


async def test_an_agent_recalls_anothers_memory_only_once_granted_read(
    catalog: NodeCatalog, nats_url: str, jmfts: RunningJmfts, brain: Brain, tmp_path: Path
) -> None:
    token_a = await jmfts.principal(A, [ROOT_A])
    token_b = await jmfts.principal(B, [ROOT_B])
    brain.evaluations = ["- The user's bike lock code is 3141."]
    spec_a = reflex_spec(catalog, A, roots=[ROOT_A], every_n=1, threshold=0.4)
    spec_b = reflex_spec(catalog, B, roots=[ROOT_B, ROOT_A], every_n=0, threshold=0.4)
    home = tmp_path / "home"
    async with (
        edge_for(nats_url, A) as edge_a,
        edge_for(nats_url, B) as edge_b,
        memory_agent(
            spec_a, nats_url=nats_url, jmfts=jmfts, token=token_a, brain=brain, data_dir=home
        ),
        memory_agent(
            spec_b, nats_url=nats_url, jmfts=jmfts, token=token_b, brain=brain, data_dir=home
        ),
    ):
        await edge_a.say("my bike lock code is 3141")
        (deposit,) = await edge_a.wait_for("memorize.tui")
        (doc_id,) = deposit.event.payload["document_ids"]

        await edge_b.say("what is the code of my bike lock")
        (refused,) = await edge_b.wait_for("recall.tui")
        await jmfts.grant(B, ROOT_A, "read")
        await edge_b.say("what is the code of my bike lock")
        granted = (await edge_b.wait_for("recall.tui", 2))[1]

    # Ungranted: A's root does not exist for B; nothing of A's was scored or shown.
    assert doc_id not in refused.event.payload["document_ids"]
    assert refused.event.payload["injected_ids"] == []
    (error,) = refused.event.payload["errors"]
    assert error.startswith(f"{ROOT_A}:") and "404" in error
    # Granted read: the same question now recalls A's memory, ahead of B's utterance.
    assert doc_id in granted.event.payload["injected_ids"]
    last = [r for r in brain.turns if r.last_user_text == "what is the code of my bike lock"][-1]
    assert "3141" in "\n".join(str(m.get("content")) for m in last.messages)
    # Before the grant, nothing of A's reached B's model, in any message.
    first_b = next(r for r in brain.turns if r.last_user_text == "what is the code of my bike lock")
    assert "3141" not in first_b.raw.decode()


async def test_read_is_not_write_and_absent_is_absent_on_every_path(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token_a = await jmfts.principal(A, [ROOT_A])
    token_b = await jmfts.principal(B, [ROOT_B], read=[ROOT_A])
    token_c = await jmfts.principal("mem_c", ["workspace/mem_c"])
    secret = await jmfts.write(ROOT_A, "The user's passport expires in March.")

    def config(agent: str) -> dict[str, object]:
        return {
            "agent": agent,
            "nats_url": "nats://unused",
            "binding_file": str(tmp_path / agent / "binding.json"),
            "jmfts_url": jmfts.url,
            "jmfts_token_file": str(tmp_path / "unused"),
            "roots": [ROOT_A],
            "memory_root": ROOT_A,
            "threshold": 0.3,
        }

    for agent, token, sees in ((A, token_a, True), (B, token_b, True), ("mem_c", token_c, False)):
        cfg = parse_config(config(agent))
        async with MemoryStore(jmfts.url, token=token) as store:
            recaller = Recaller(cfg, store, ReviewBook(cfg.reviews_path, 3.0))
            record, shown = await recaller.recall("when does my passport expire")
            assert ([h.memory.id for h in shown] == [secret]) is sees, agent
            if not sees:
                assert record.hits == [] and "404" in record.errors[0]
            if agent == A:
                continue
            # Neither a read grant nor no grant lets an agent deposit into A's memory.
            with pytest.raises(JmftsError) as refused:
                fact = "The user's passport expires in April."
                depositor = Depositor(cfg, store, recaller.reviews)
                await depositor.deposit([Extracted(fact, "model", (fact,))])
            assert refused.value.status in (403, 404)


async def test_a_workspace_path_resolves_to_the_workspace_not_the_journal(
    jmfts: RunningJmfts,
) -> None:
    """Both are roots titled after the agent; before, the journal (granted first) won."""
    token = await jmfts.principal("mem_d", ["journal/mem_d", "workspace/mem_d"])
    async with MemoryStore(jmfts.url, token=token) as store:
        assert await store.resolve("workspace/mem_d") == await jmfts.ensure_path("workspace/mem_d")
        assert await store.resolve("journal/mem_d") == await jmfts.ensure_path("journal/mem_d")


async def test_a_record_the_model_wrote_is_never_recalled_as_a_fact_about_the_user(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    """Records (``jmfts_write``) and journal notes share the agent's workspace with its
    memories; before, recall showed them as facts about the user."""
    token = await jmfts.principal("mem_e", ["workspace/mem_e", "journal/mem_e"])
    fact = await jmfts.write("workspace/mem_e", "The user's passport expires in March.")
    record = await jmfts.write(
        "workspace/mem_e", "Passport expiry checklist: renew passport in March.", usetype="record"
    )
    note = await jmfts.write(
        "workspace/mem_e", "when does my passport expire, my passport", usetype="journal_entry"
    )
    cfg = parse_config(
        {
            "agent": "mem_e",
            "nats_url": "nats://unused",
            "binding_file": str(tmp_path / "binding.json"),
            "jmfts_url": jmfts.url,
            "jmfts_token_file": str(tmp_path / "unused"),
            "roots": ["workspace/mem_e"],
            "memory_root": "workspace/mem_e",
            "threshold": 0.3,
        }
    )
    async with MemoryStore(jmfts.url, token=token) as store:
        recaller = Recaller(cfg, store, ReviewBook(cfg.reviews_path, 3.0))
        record_of_search, shown = await recaller.recall("when does my passport expire")
    scored = {h.id for h in record_of_search.hits}
    assert [h.memory.id for h in shown] == [fact]
    assert not {record, note} & scored  # never even a candidate
