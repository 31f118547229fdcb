"""Memorizing off the turn, end to end: evaluator, dedup, overlap, findable at ack."""

from __future__ import annotations

import asyncio

import httpx

from home.jmfts.testing import RunningJmfts
from shared.schema.catalog import NodeCatalog
from tests.home.memory.conftest import (
    AGENT,
    Brain,
    Converse,
    reflex_spec,
    session_entries,
    until,
    user_texts,
)
from tests.support.scripted_model import Reply

ROOT = f"workspace/{AGENT}"
# The agent's knowledge book beside its workspace, as `home up` grants it.
GRANTS = [ROOT, f"knowledge/{AGENT}"]


async def stored_contents(jmfts: RunningJmfts, token: str) -> list[str]:
    """The agent's current memories (superseded records left out), as the agent sees them."""
    async with httpx.AsyncClient(
        base_url=jmfts.url, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        found = (await http.post("/search/fulltext", json={"query": "user", "limit": 100})).json()[
            "results"
        ]
    return sorted(hit["document"]["content"] for hit in found if hit["document"]["content"])


async def test_a_fact_told_once_is_deposited_and_recalled_later_and_told_twice_is_stored_once(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    brain.evaluations = [
        "- The user's dog is called Biscuit.",
        "NONE",
        "- The user's dog is called Biscuit.",
    ]
    spec = reflex_spec(catalog, every_n=1, threshold=0.4)
    async with converse(spec, token) as (edge, node):
        first = await edge.say("my dog is called Biscuit")
        (deposit,) = await edge.wait_for("memorize.tui")
        await edge.say("what should I cook tonight")
        await edge.wait_for("memorize.tui", 2)
        await edge.say("remember, my dog's name is Biscuit")
        await edge.wait_for("memorize.tui", 3)
        later = await edge.say("what is my dog called")
        await edge.wait_for("recall.tui", 4)
        await until(lambda: len(node.stats.outcomes) == 4)
        entries = await session_entries(node, "memory_memorize")

    assert deposit.event.binding_id == first.binding_id
    payload = deposit.event.payload
    assert payload["status"] == "deposited"
    assert payload["queries"] == ["The user's dog is called Biscuit."]
    (doc_id,) = payload["document_ids"]
    assert payload["deposits"] == [
        {
            "id": doc_id,
            "action": "created",
            "supersedes": None,
            "path": "model",
            # The claim went into the knowledge book, naming the dog.
            "knowledge": "dog Biscuit · is called · Biscuit (#1)",
            # Filed as a memory about who someone (here a pet) is.
            "kind": "person",
        }
    ]
    # The evaluator saw the conversation up to the captured position, on its own branch.
    evaluation = brain.evaluator_requests[0]
    assert "my dog is called Biscuit" in "\n".join(user_texts(evaluation))
    assert evaluation.tool_names == []
    # Told twice: the second deposit found it stored, wrote nothing new, and says the
    # restatement reinforced it.
    third = edge.on("memorize.tui")[2].event.payload
    assert third["deposits"] == [
        {
            "id": doc_id,
            "action": "reinforced",
            "supersedes": None,
            "path": "model",
            "knowledge": None,
            "kind": None,
        }
    ]
    assert await stored_contents(jmfts, token) == ["The user's dog is called Biscuit."]
    # Recalled in a later turn, ahead of the utterance.
    last_turn = brain.turns[-1]
    assert user_texts(last_turn)[-1] == "what is my dog called"
    assert "Biscuit" in user_texts(last_turn)[-2]
    (last_recall,) = [e for e in edge.on("recall.tui") if e.event.binding_id == later.binding_id]
    assert doc_id in last_recall.event.payload["injected_ids"]
    assert [e["data"]["status"] for e in entries][:3] == ["deposited", "nothing", "deposited"]


async def test_a_near_duplicate_supersedes_instead_of_piling_up(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    old = await jmfts.write(ROOT, "The user's dentist appointment is on Tuesday.")
    brain.evaluations = ["- The user's dentist appointment is on Tuesday at 3 pm."]
    spec = reflex_spec(catalog, every_n=1, dedup_threshold=0.8)
    async with converse(spec, token) as (edge, _):
        await edge.say("my dentist appointment is on Tuesday at three pm")
        (report,) = await edge.wait_for("memorize.tui")

    (deposit,) = report.event.payload["deposits"]
    # The same slot (dentist appointment / is on) with a fuller value reads as a correction;
    # either way the new record replaces the old one.
    assert deposit["action"] == "corrected" and deposit["supersedes"] == old
    assert await stored_contents(jmfts, token) == [
        "The user's dentist appointment is on Tuesday at 3 pm."
    ]


async def test_the_evaluator_runs_off_the_turn_and_an_overlap_is_reported_busy(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    brain.evaluation_gate = asyncio.Event()
    brain.evaluations = ["- The user lives on the fourth floor."]
    spec = reflex_spec(catalog, every_n=1)
    async with converse(spec, token) as (edge, node):
        await edge.say("I live on the fourth floor")
        await edge.wait_for("speak.tui")
        await until(lambda: len(brain.evaluator_requests) == 1)
        # The evaluator is held in its model call; the next utterance is answered anyway.
        second = await edge.say("is it raining")
        speaks = await edge.wait_for("speak.tui", 2)
        (busy,) = await edge.wait_for("memorize.tui")
        assert not brain.evaluation_gate.is_set()
        brain.evaluation_gate.set()
        reports = await edge.wait_for("memorize.tui", 2)
        await until(lambda: len(node.stats.outcomes) == 2)

    assert speaks[1].event.binding_id == second.binding_id
    assert node.stats.busy_retries == 0, "τ never refused a prompt (-32000)"
    assert all(o.end_reason == "terminate" for o in node.stats.outcomes)
    assert busy.event.payload["status"] == "evaluator_busy"
    assert busy.event.binding_id == second.binding_id
    assert busy.event.payload["busy_with"] == reports[1].event.payload["evaluation_id"]
    assert reports[1].event.payload["status"] == "deposited"
    assert len(brain.evaluator_requests) == 1, "the overlap was refused, not queued"


async def test_a_deposit_is_recallable_on_the_very_next_turn(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    brain.evaluations = ["- The user's locker code is 4711."]
    spec = reflex_spec(catalog, every_n=1, threshold=0.4)
    async with converse(spec, token) as (edge, _):
        await edge.say("my locker code is 4711")
        (deposit,) = await edge.wait_for("memorize.tui")
        # The very next turn, as soon as the deposit's report is out.
        nxt = await edge.say("what is my locker code")
        recalls = await edge.wait_for("recall.tui", 2)

    (doc_id,) = deposit.event.payload["document_ids"]
    (report,) = [r for r in recalls if r.event.binding_id == nxt.binding_id]
    assert doc_id in report.event.payload["injected_ids"]


async def test_with_a_grammar_model_each_kept_utterance_is_stored_as_its_draft_unasked(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    # What the 135M model wrote when it was asked (measured): a name nobody said.
    brain.evaluations = ["- The user's name: Theresa\n"]
    spec = reflex_spec(catalog, every_n=2)
    async with converse(spec, token, grammar="gbnf") as (edge, _):
        await edge.say("Remember this: my sister Ingrid lives in Trondheim.")
        await edge.say("um so I'm allergic to cats")
        (report,) = await edge.wait_for("memorize.tui")

    # The user's own words in the third person; the model was never asked.
    assert brain.evaluator_requests == []
    payload = report.event.payload
    assert payload["status"] == "deposited" and payload["refused"] == []
    assert payload["queries"] == [
        "The user's sister Ingrid lives in Trondheim.",
        "The user is allergic to cats.",
    ]
    assert [d["path"] for d in payload["deposits"]] == ["draft", "draft"]
    assert sorted(await stored_contents(jmfts, token)) == [
        "The user is allergic to cats.",
        "The user's sister Ingrid lives in Trondheim.",
    ]
    # Each memory names what it was written from, so it can be audited later.
    thread = (await jmfts.document(payload["document_ids"][0]))["structured_content"]
    assert thread["provenance"]["said"] == ["Remember this: my sister Ingrid lives in Trondheim."]
    assert thread["provenance"]["extracted_by"] == "draft"


async def test_a_models_fact_with_words_nobody_said_is_refused_and_named_not_stored(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    brain.evaluations = [
        "- The user's sister Ingrid lives in Trondheim.\n- The user's name is Theresa.\n"
    ]
    spec = reflex_spec(catalog, every_n=1)
    async with converse(spec, token) as (edge, _):
        await edge.say("my sister Ingrid lives in Trondheim")
        (report,) = await edge.wait_for("memorize.tui")
        # The node goes on answering.
        await edge.say("and she has a cat")
        await edge.wait_for("speak.tui", 2)

    payload = report.event.payload
    assert payload["status"] == "deposited"
    assert payload["queries"] == ["The user's sister Ingrid lives in Trondheim."]
    assert [d["path"] for d in payload["deposits"]] == ["model"]
    assert payload["refused"] == [
        {"memory": "The user's name is Theresa.", "path": "model", "invented": ["name", "theresa"]}
    ]
    assert await stored_contents(jmfts, token) == ["The user's sister Ingrid lives in Trondheim."]


async def test_with_a_grammar_model_the_keep_gate_skips_a_question_before_the_model_sees_it(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    brain.evaluations = ["- The user's allergy is to cats.\n"]
    spec = reflex_spec(catalog, every_n=2)
    async with converse(spec, token, grammar="gbnf") as (edge, _):
        await edge.say("I'm allergic to cats")
        await edge.say("what is the weather like tomorrow")
        (report,) = await edge.wait_for("memorize.tui")
        await edge.say("what time is it")
        await edge.say("turn off the lights")
        reports = await edge.wait_for("memorize.tui", 2)

    # The fact was kept in the user's words; the question was not, and no model was asked.
    assert brain.evaluator_requests == []
    payload = report.event.payload
    assert payload["status"] == "deposited"
    assert payload["queries"] == ["The user is allergic to cats."]
    assert payload["skipped"] == 1
    kept, skipped = payload["gate"]
    assert kept["keep"] and kept["score"] >= 0
    assert not skipped["keep"] and skipped["score"] < 0
    # A window of a question and a command: nothing evaluated, nothing deposited.
    questions = reports[1].event.payload
    assert questions["status"] == "nothing" and questions["document_ids"] == []
    assert questions["skipped"] == 2
    assert await stored_contents(jmfts, token) == ["The user is allergic to cats."]


async def test_the_nodes_own_reprompt_is_neither_recalled_for_nor_evaluated(
    catalog: NodeCatalog, jmfts: RunningJmfts, brain: Brain, converse: Converse
) -> None:
    token = await jmfts.principal(AGENT, GRANTS)
    # The first answer cannot be read aloud: the node re-prompts once, on its own.
    brain.turn_replies = [Reply.say("```\nMochi\n```")]
    brain.evaluations = [
        "- The user's allergy is to cats.\n",
        "- The user's diet is vegetarian.\n",
    ]
    spec = reflex_spec(catalog, every_n=2)
    async with converse(spec, token, grammar="gbnf") as (edge, node):
        await edge.say("I'm allergic to cats")
        await until(lambda: node.stats.reprompts == 1 and len(node.stats.outcomes) == 2)
        await edge.say("I'm vegetarian")
        (report,) = await edge.wait_for("memorize.tui")
        recalls = edge.on("recall.tui")

    assert "could not be read aloud" in brain.turns[1].last_user_text
    assert report.event.payload["queries"] == [
        "The user is allergic to cats.",
        "The user is vegetarian.",
    ]
    assert len(report.event.payload["gate"]) == 2
    assert len(recalls) == 2, "one recall per user utterance, none for the re-prompt"
