"""The knowledge book on a real JMFTS: each kept fact's claim is a triple on one entity, and a
later claim with the same head closes the earlier one (and replaces its memory in recall)
whatever words either was said in. Drafts are what the reflex stores for the embedded
model (:func:`home.memory.restate.restate_draft`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from home.jmfts.client import JmftsClient
from home.jmfts.testing import RunningJmfts
from home.memory.config import ReflexConfig, parse_config
from home.memory.extract import Extracted
from home.memory.fsrs import ReviewBook
from home.memory.memories import MemoryStore
from home.memory.records import DepositRecord
from home.memory.reflex import Depositor, Recaller
from home.memory.restate import restate_draft

AGENT = "mem_k"


def config(jmfts: RunningJmfts, tmp_path: Path, agent: str = AGENT) -> ReflexConfig:
    return parse_config(
        {
            "agent": agent,
            "nats_url": "nats://unused",
            "binding_file": str(tmp_path / agent / "binding.json"),
            "jmfts_url": jmfts.url,
            "jmfts_token_file": str(tmp_path / "unused"),
            "roots": [f"workspace/{agent}"],
            "threshold": 0.3,
        }
    )


class Household:
    """One agent's reflex halves, fed utterances as the draft path feeds them."""

    def __init__(self, cfg: ReflexConfig, store: MemoryStore) -> None:
        reviews = ReviewBook(cfg.reviews_path, 3.0)
        self.recaller = Recaller(cfg, store, reviews)
        self.depositor = Depositor(cfg, store, reviews)
        self.client: JmftsClient = store.client

    async def say(self, utterance: str) -> DepositRecord:
        draft = restate_draft(utterance)
        assert draft is not None
        (record,) = await self.depositor.deposit([Extracted(draft, "draft", (utterance,))])
        return record

    async def recalled(self, question: str) -> list[str]:
        _, shown = await self.recaller.recall(question)
        return [h.memory.content for h in shown]

    async def triples(self, **params: Any) -> list[dict[str, Any]]:
        rows = await self.client.request("GET", "/triples/query", params=params)
        return list(rows)


async def household(
    jmfts: RunningJmfts, tmp_path: Path, agent: str = AGENT
) -> tuple[Household, MemoryStore]:
    token = await jmfts.principal(agent, [f"workspace/{agent}", f"knowledge/{agent}"])
    store = MemoryStore(jmfts.url, token=token)
    return Household(config(jmfts, tmp_path, agent), store), store


async def test_a_move_said_by_name_closes_the_home_said_by_relation(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    home, store = await household(jmfts, tmp_path)
    async with store:
        porto = await home.say("my sister ana lives in porto")
        await home.say("my brother tom lives in berlin")  # same predicate, another person
        before_move = datetime.now(UTC)
        lyon = await home.say("ana moved to lyon last month")
        shown = await home.recalled("where does my sister live")
        assert any("lyon" in m for m in shown), shown
        assert not any("porto" in m for m in shown), shown
        assert any("berlin" in m for m in await home.recalled("where does my brother live"))

        assert porto.action == "created" and lyon.action == "corrected", (porto, lyon)
        assert lyon.supersedes == porto.id
        assert lyon.knowledge is not None and "closes" in lyon.knowledge, lyon
        rows = await home.triples(predicate="lives in")
        by_value = {r["object_literal"]: r for r in rows}
        assert set(by_value) == {"porto", "berlin", "lyon"}, rows
        # One entity for "my sister ana" and "ana"; the closed triple stays, its windows shut.
        assert by_value["porto"]["subject"]["id"] == by_value["lyon"]["subject"]["id"]
        assert by_value["porto"]["invalidated_by"] == by_value["lyon"]["id"]
        assert by_value["porto"]["valid_until"] is not None
        assert by_value["lyon"]["invalidated_at"] is None
        assert by_value["berlin"]["invalidated_at"] is None
        assert by_value["lyon"]["source_document_id"] == lyon.id
        then = await home.triples(predicate="lives in", as_of=before_move.isoformat())
        assert {r["object_literal"] for r in then} == {"porto", "berlin"}
        subject = by_value["lyon"]["subject"]
        assert subject["usetype"] == "entity"
        assert subject["parent_id"] == await jmfts.ensure_path(f"knowledge/{AGENT}")
        assert set(subject["structured_content"]["names"]) == {"ana"}
        assert set(subject["structured_content"]["relations"]) == {"sister"}


async def test_a_pronoun_is_the_person_last_named(jmfts: RunningJmfts, tmp_path: Path) -> None:
    home, store = await household(jmfts, tmp_path, "mem_k2")
    async with store:
        await home.say("my brother's wife is called lena")
        nurse = await home.say("lena works as a nurse")
        await home.say("my dog is called biscuit")
        pilot = await home.say("she changed jobs she's a pilot now")
        assert pilot.action == "corrected" and pilot.supersedes == nurse.id, (nurse, pilot)
        shown = await home.recalled("what does lena do for work")
        assert not any("nurse" in m for m in shown), shown


async def test_a_pronoun_is_first_the_person_its_sentence_named(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    home, store = await household(jmfts, tmp_path, "mem_k7")
    async with store:
        await home.say("my sister claire is a teacher")
        nurse = await home.say("priya is a nurse")
        await home.say("claire's studying for a masters")
        midwife = await home.say("priya finished her retraining, she's a midwife now")
        assert midwife.supersedes == nurse.id, (nurse, midwife)
        nurse_triple = re.search(r"\(#(\d+)\)", nurse.knowledge or "")
        assert nurse_triple is not None, nurse
        assert (midwife.knowledge or "").startswith("priya · is a · midwife"), midwife
        assert (midwife.knowledge or "").endswith(f"closes #{nurse_triple.group(1)})"), midwife


async def test_a_job_left_is_corrected_and_the_memory_saying_he_is_found_by_name(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    """Saying "he's left teaching" corrects the memory that says he teaches, and the new one,
    which names him only as "he", is still found when he is asked about by name."""
    home, store = await household(jmfts, tmp_path, "mem_k8")
    async with store:
        teaches = await home.say("my husband kwame teaches maths at the secondary school")
        await home.say("my sister claire is a nurse")
        tester = await home.say("he's left teaching he's a software tester now")
        assert tester.action == "corrected" and tester.supersedes == teaches.id, tester
        shown = await home.recalled("what's kwame's job")
        assert any("software tester" in m for m in shown), shown
        assert not any("maths" in m for m in shown), shown
        doc = await home.client.get(tester.id)
        assert doc.data["title"] == "husband kwame", doc.data
        assert "kwame" not in doc.data["content"].lower()  # searched by, never shown
        # A memory that names whom it is about, even through their owner, has no title.
        for said in ("my son's girlfriend works at the library", "kwame plays the drums"):
            named = await home.say(said)
            assert (await home.client.get(named.id)).data["title"] is None, said


async def test_a_relation_said_alone_is_the_one_said_with_my(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    home, store = await household(jmfts, tmp_path, "mem_k9")
    async with store:
        hastings = await home.say("my gran lives on her own in a bungalow in hastings")
        rye = await home.say("gran's in a care home in rye since may")
        assert rye.action == "corrected" and rye.supersedes == hastings.id, (hastings, rye)
        shown = await home.recalled("where does my grandmother live")
        assert not any("hastings" in m for m in shown), shown


async def test_a_new_pet_or_another_childs_appointment_replaces_nothing(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    home, store = await household(jmfts, tmp_path, "mem_k5")
    async with store:
        biscuit = await home.say("our dog is called biscuit")
        clover = await home.say("we've got a rabbit now as well she's called clover")
        assert clover.action == "created" and clover.supersedes is None, clover
        assert any("biscuit" in m for m in await home.recalled("what's our dog's name"))
        son = await home.say("my son's dentist appointment is on the ninth")
        daughter = await home.say("my daughter's dentist appointment is on the twentieth")
        assert daughter.action == "created" and daughter.supersedes is None, daughter
        assert any("ninth" in m for m in await home.recalled("when is my son at the dentist"))
        named = {r["object_literal"] for r in await home.triples(predicate="is called")}
        assert named == {"biscuit", "clover"}, named
        assert {biscuit.action, son.action} == {"created"}


async def test_what_one_person_is_said_to_be_or_do_replaces_nothing_else(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    """Only a role, a home or an age is one value a later "is" replaces; a gym and its
    locker code, a move of the key and a move into the house, are two things."""
    home, store = await household(jmfts, tmp_path, "mem_k6")
    async with store:
        said = [
            "leo is allergic to peanuts",
            "leo's training at victoria park tonight",
            "maya's eleven, she's in year six",
            "maya can stay up till nine now that she's older",
            "my gym is fitzone on king street",
            "the code for my locker at the gym is 4471",
            "we moved the spare key to the shed",
            "we moved into this house in 2015",
        ]
        records = [await home.say(text) for text in said]
        replaced = [(r.fact, r.supersedes) for r in records if r.supersedes is not None]
        assert not replaced, replaced
        assert any("peanuts" in m for m in await home.recalled("what is leo allergic to"))
        assert any("eleven" in m for m in await home.recalled("how old is maya"))


async def test_not_x_corrects_the_memory_that_says_x(jmfts: RunningJmfts, tmp_path: Path) -> None:
    home, store = await household(jmfts, tmp_path, "mem_k3")
    async with store:
        mondays = await home.say("maya's piano lessons are on mondays")
        await home.say("the bins go out on thursdays")
        fix = await home.say("no it's tuesdays not mondays")
        assert fix.action == "corrected" and fix.supersedes == mondays.id, (mondays, fix)
        rows = await home.triples(include_invalidated=True)
        closed = [r for r in rows if r["object_literal"] == "mondays"]
        assert closed and closed[0]["invalidated_at"] is not None, rows


async def test_without_a_knowledge_grant_memories_are_still_kept(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("mem_k4", ["workspace/mem_k4"])
    async with MemoryStore(jmfts.url, token=token) as store:
        cfg = config(jmfts, tmp_path, "mem_k4")
        depositor = Depositor(cfg, store, ReviewBook(cfg.reviews_path, 3.0))
        fact = "The user's sister ana lives in porto."
        (record,) = await depositor.deposit([Extracted(fact, "draft", (fact,))])
        assert record.action == "created"
        assert record.knowledge is not None and record.knowledge.startswith("unrecorded: ")
        assert "404" in record.knowledge
