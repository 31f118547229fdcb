"""The curator's pass on a real JMFTS: a memory said twice is merged into one, by a
retraction with the curator's provenance; what differs, or what it already read, is left."""

from __future__ import annotations

from pathlib import Path

from home.jmfts.testing import RunningJmfts
from home.memory.curator import CONTRADICTED_BY, MERGED_INTO, Curator, Watermarks
from home.memory.heads import EntityRef
from home.memory.knowledge import KnowledgeBook
from home.memory.memories import MemoryStore
from home.memory.provenance import Provenance

AGENT = "mem_cur"
ROOT = f"workspace/{AGENT}"
CURATOR = "agent.memory_curator"


async def current_texts(store: MemoryStore) -> list[str]:
    root = await store.resolve(ROOT)
    view = await store.client.request("GET", f"/workspace/{root}")
    return [d["content"] for d in view["current"]]


async def test_a_memory_said_twice_is_merged_into_the_one_that_says_more(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("memory_curator", [ROOT])
    first = await jmfts.write(ROOT, "The user's dog is called Biscuit.", usetype="memory:person")
    porto = await jmfts.write(ROOT, "The user's sister lives in Porto.", usetype="memory:person")
    await jmfts.write(ROOT, "The user's dog is called Rex.", usetype="memory:person")
    await jmfts.write(ROOT, "The user's note on dogs.", usetype="record")
    again = await jmfts.write(ROOT, "the user's dog is called biscuit", usetype="memory:person")
    fuller = await jmfts.write(ROOT, "The user's sister lives in Porto in Portugal.")
    async with MemoryStore(jmfts.url, token=token) as store:
        curator = Curator(store, CURATOR, Watermarks(tmp_path / "curator.json"))
        merges = await curator.curate(ROOT, AGENT, binding_id="b1", schema="edge_asr_memory")
        assert {(m.merged, m.kept) for m in merges} == {(again, first), (porto, fuller)}
        texts = await current_texts(store)
        assert sorted(texts) == sorted(
            [
                "The user's dog is called Biscuit.",
                "The user's dog is called Rex.",  # another value: no duplicate
                "The user's note on dogs.",  # a record: not the curator's to merge
                "The user's sister lives in Porto in Portugal.",
            ]
        ), texts
        retraction = await store.client.get(merges[0].retraction)
        assert retraction.usetype == "retraction"
        assert retraction.data["supersedes"] == merges[0].merged
        assert (retraction.content or "").startswith(MERGED_INTO)
        origin = Provenance.from_structured(retraction.data["structured_content"])
        assert origin is not None and origin.written_by == CURATOR and origin.binding_id == "b1"

        # The next pass reads only what is new since.
        assert await curator.curate(ROOT, AGENT) == []
        late = await jmfts.write(ROOT, "The user's dog is called Rex!", usetype="memory:person")
        (merge,) = await curator.curate(ROOT, AGENT)
        assert merge.merged == late and "Rex" in merge.kept_text


async def test_a_belief_a_later_one_contradicts_is_closed_and_its_memory_retracted(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    """Two open beliefs with one head, as two devices' deposits at once leave them (each
    planned before the other was written): the later stands, the earlier is resolved."""
    knowledge = f"knowledge/{AGENT}"
    await jmfts.ensure_path(knowledge)
    token = await jmfts.principal("memory_curator", [ROOT, knowledge])
    porto = await jmfts.write(ROOT, "The user's sister ana lives in porto.")
    lyon = await jmfts.write(ROOT, "The user's sister ana lives in lyon.")
    cat = await jmfts.write(ROOT, "The user's cat is called miso.")
    async with MemoryStore(jmfts.url, token=token) as store:
        book = KnowledgeBook(store.client, knowledge)
        ana = await book.resolve(EntityRef("person", relation="sister", name="ana"), create=True)
        miso = await book.resolve(EntityRef("pet", relation="cat"), create=True)
        assert ana is not None and miso is not None
        for entity, predicate, value, evidence, day in (
            (ana, "lives in", "porto", porto, 1),
            (ana, "lives in", "lyon", lyon, 2),
            (miso, "is called", "miso", cat, 1),
            (miso, "is called", "Miso", cat, 2),  # the same value twice: nothing to resolve
        ):
            await store.client.request(
                "POST",
                "/triples",
                json={
                    "subject_id": entity.id,
                    "predicate_id": await book.predicate_id(predicate),
                    "object_literal": value,
                    "source_document_id": evidence,
                    "valid_from": f"2026-11-0{day}T10:00:00+00:00",
                },
            )
        curator = Curator(store, CURATOR, Watermarks(tmp_path / "curator.json"))
        (resolved,) = await curator.curate(ROOT, AGENT, binding_id="b2")
        assert (resolved.merged, resolved.kept, resolved.contradicted) == (porto, lyon, True)
        beliefs = {r["object_literal"] for r in await book.open_beliefs(ana.id)}
        assert beliefs == {"lyon"}
        assert "The user's sister ana lives in porto." not in await current_texts(store)
        retraction = await store.client.get(resolved.retraction)
        assert (retraction.content or "").startswith(f"{CONTRADICTED_BY}{lyon}")
        assert await curator.curate(ROOT, AGENT) == [], "resolved once"
