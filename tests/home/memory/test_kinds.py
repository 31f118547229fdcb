"""Memory kinds: every memory the reflex keeps is filed as ``memory:<kind>``, recall and
``memory_search`` filter by kind, and preferences are shown first.

The classifier is judged on a labelled set written before it (``kinds_tune.yaml`` to tune
on, ``kinds_held_out.yaml`` never read while tuning), through the draft path the embedded
model uses; the rest runs on a real JMFTS."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from tau_agent_core.tools.base import ToolError

from home.jmfts.client import JmftsClient
from home.jmfts.models import MEMORY_KINDS, RECORD_USETYPE
from home.jmfts.testing import RunningJmfts
from home.memory.config import parse_config
from home.memory.errors import MemoryConfigError
from home.memory.kinds import KINDS, kind_of, parse_kinds, usetype_kind
from home.memory.memories import MemoryStore, StoredMemory
from home.memory.recall import ScoredHit, threaded
from home.memory.restate import restate_draft
from home.tau_extensions.memory_tools import MemoryTools
from tests.home.memory.test_knowledge import Household, config

HERE = Path(__file__).parent
AGENT = "mem_kinds"
ROOT = f"workspace/{AGENT}"


def labelled(name: str) -> list[dict[str, str]]:
    items: list[dict[str, str]] = yaml.safe_load((HERE / name).read_text())["items"]
    return items


@pytest.mark.parametrize("split", ["kinds_tune.yaml", "kinds_held_out.yaml"])
def test_a_kept_fact_is_filed_by_kind_on_a_set_written_before_the_code(split: str) -> None:
    items = labelled(split)
    wrong = []
    for item in items:
        draft = restate_draft(item["utterance"])
        assert draft is not None, item["utterance"]
        if kind_of(draft) != item["kind"]:
            wrong.append((item["utterance"], item["kind"], kind_of(draft)))
    assert Counter(i["kind"] for i in items).keys() == set(KINDS), "every kind is in the set"
    accuracy = 1 - len(wrong) / len(items)
    print(f"{split}: {accuracy:.3f} of {len(items)}; wrong: {wrong}")
    assert accuracy >= 0.9, wrong


def test_the_kinds_the_cli_offers_are_the_kinds_the_reflex_files() -> None:
    assert MEMORY_KINDS == KINDS
    assert usetype_kind(None) == "fact", "a memory kept before kinds reads as a fact"
    assert usetype_kind("memory:preference") == "preference"
    assert parse_kinds(None) is None
    assert parse_kinds(["fact", "preference"]) == ("preference", "fact")
    for bad in ([], ["hobby"], "preference", [1]):
        with pytest.raises(ValueError, match="non-empty list of preference"):
            parse_kinds(bad)


def test_a_roots_kinds_are_checked_and_named_in_the_error(tmp_path: Path) -> None:
    base = {
        "agent": "a",
        "nats_url": "nats://x",
        "binding_file": str(tmp_path / "b.json"),
        "jmfts_url": "http://x",
        "jmfts_token_file": str(tmp_path / "t"),
    }
    cfg = parse_config({**base, "roots": [{"path": "workspace/a", "kinds": ["preference"]}]})
    assert cfg.roots[0].kinds == ("preference",)
    with pytest.raises(MemoryConfigError, match=r"roots\[0\]\.kinds.*hobby"):
        parse_config({**base, "roots": [{"path": "workspace/a", "kinds": ["hobby"]}]})


def hit(doc_id: int, days_ago: int, usetype: str | None) -> ScoredHit:
    when = datetime(2026, 12, 1, tzinfo=UTC) - timedelta(days=days_ago)
    memory = StoredMemory(doc_id, f"memory {doc_id}", when, usetype=usetype)
    return ScoredHit(memory, "workspace/a", 1.0, 0.5, True)


def test_preferences_are_shown_first_then_the_rest_oldest_first() -> None:
    shown = threaded(
        [
            hit(1, 30, "memory:fact"),
            hit(2, 1, "memory:preference"),
            hit(3, 10, None),
            hit(4, 20, "memory:preference"),
            hit(5, 5, "memory:routine"),
        ]
    )
    assert [h.memory.id for h in shown] == [4, 2, 1, 3, 5]


async def stored_usetype(client: JmftsClient, doc_id: int) -> str | None:
    usetype: str | None = (await client.get(doc_id)).usetype
    return usetype


async def test_each_memory_is_stored_with_its_kind_and_recall_filters_and_orders_by_it(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal(AGENT, [ROOT, f"knowledge/{AGENT}"])
    legacy = await jmfts.write(ROOT, "The user's sister maya lives in leeds.")
    record = await jmfts.write(
        ROOT, "Maya's note: the user likes leeds in spring.", usetype=RECORD_USETYPE
    )
    async with MemoryStore(jmfts.url, token=token) as store:
        home = Household(config(jmfts, tmp_path, AGENT), store)
        said = {
            "my sister maya loves gardening": "preference",
            "maya visits every sunday": "routine",
            "maya's birthday party is on the fourteenth of may": "event",
            "maya is a nurse": "person",
            "i work at the library in leeds": "fact",
        }
        for utterance, kind in said.items():
            deposit = await home.say(utterance)
            assert deposit.kind == kind, (utterance, deposit)
            assert await stored_usetype(store.client, deposit.id) == f"memory:{kind}"

        everything = (await home.recaller.recall("tell me about my sister maya"))[1]
        kinds = [h.memory.kind for h in everything]
        assert kinds[0] == "preference", kinds
        ids = {h.memory.id for h in everything}
        assert legacy in ids, "a memory kept before kinds is still recalled (as a fact)"
        assert record not in ids, "a record the model wrote is never recalled as a memory"

        only = parse_config(
            {
                **_as_config(home),
                "roots": [{"path": ROOT, "kinds": ["preference", "routine"]}],
            }
        )
        home.recaller.config = only
        narrowed = (await home.recaller.recall("tell me about my sister maya"))[1]
        assert {h.memory.kind for h in narrowed} == {"preference", "routine"}
        facts = parse_config({**_as_config(home), "roots": [{"path": ROOT, "kinds": ["fact"]}]})
        home.recaller.config = facts
        found = {h.memory.id for h in (await home.recaller.recall("where does maya live"))[1]}
        assert legacy in found, "no usetype reads as a fact"
        assert {(await store.get(i)).kind for i in found} == {"fact"}


def _as_config(home: Household) -> dict[str, Any]:
    cfg = home.recaller.config
    return {
        "agent": cfg.agent,
        "nats_url": cfg.nats_url,
        "binding_file": str(cfg.binding_file),
        "jmfts_url": cfg.jmfts_url,
        "jmfts_token_file": str(cfg.jmfts_token_file),
        "threshold": cfg.threshold,
    }


async def test_memory_search_filters_by_kind_and_refuses_an_unknown_one(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("operator_k", [], read=[ROOT])
    likes = await jmfts.write(ROOT, "The user loves jazz.", usetype="memory:preference")
    plays = await jmfts.write(
        ROOT, "The user plays jazz piano on fridays.", usetype="memory:routine"
    )
    noted = await jmfts.write(ROOT, "Jazz night notes.", usetype=RECORD_USETYPE)
    tools = MemoryTools({"agent": "operator_k", "binding_file": str(tmp_path / "none.json")})
    tools.client = JmftsClient(jmfts.url, token=token)
    try:

        async def search(**params: Any) -> str:
            answer = await tools.search("call", {"query": "jazz", **params}, None, None, None)
            text: str = answer["content"][0]["text"]
            return text

        every = await search()
        assert all(f"[{i}]" in every for i in (likes, plays, noted))
        assert ", preference: The user loves jazz." in every, every
        preferred = await search(kinds=["preference"])
        assert f"[{likes}]" in preferred and f"[{plays}]" not in preferred
        assert f"[{noted}]" not in preferred, "kinds ask for memories, not records"
        with pytest.raises(ToolError, match=r"'kinds'.*hobby"):
            await search(kinds=["hobby"])
    finally:
        await tools.client.close()
