"""The curator's pass on a real JMFTS: a memory said twice is merged into one, by a
retraction with the curator's provenance; what differs, or what it already read, is left."""

from __future__ import annotations

from pathlib import Path

from home.jmfts.testing import RunningJmfts
from home.memory.curator import MERGED_INTO, Curator, Watermarks
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
