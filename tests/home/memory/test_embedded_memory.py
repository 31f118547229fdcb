"""The acceptance line of the memory reflex with the real embedded model (SmolLM2-135M).

`home up` with `edge_asr_memory` applied and no `--llm-url`: a fact said in the first
turn is deposited by the evaluator (the utterance form, decoded under the fact
grammar) after the fourth turn, and the fifth turn's recall report carries it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from shared.event import Event
from shared.nats_confirm import confirm_subscriptions
from tests.home.test_home_turn import play_edge_turn
from tests.support.home_up import running_home

pytestmark = pytest.mark.slow
AGENT = "edge_asr_memory"


async def test_a_fact_said_in_one_turn_is_in_a_later_turns_recall_report(tmp_path: Path) -> None:
    async with running_home(tmp_path / "home", None, apply=(AGENT,)) as home:
        nc = await nats.connect(home.nats_url)
        try:
            recalls = await nc.subscribe("events.workspace.*.out.recall.>")
            memorized = await nc.subscribe("events.workspace.*.out.memorize.>")
            await confirm_subscriptions(nc)
            # every_n is 1 in the shipped catalog: the first report is the first turn's.
            for text in (
                "my dog is called Biscuit",
                "what should I cook tonight",
                "tell me a joke",
                "is it going to rain",
            ):
                await play_edge_turn(home.nats_url, text, within_s=90)
            async with asyncio.timeout(120):
                report = Event.from_json((await memorized.next_msg(timeout=120)).data)
            assert report.payload["status"] == "deposited", report.payload
            ids = [d["id"] for d in report.payload["deposits"]]
            deposited = dict(zip(ids, report.payload["queries"], strict=True))
            assert any("Biscuit" in fact for fact in deposited.values()), deposited

            _, _, question = await play_edge_turn(home.nats_url, "what is my dog called", 90)
            async with asyncio.timeout(30):
                while True:
                    recall = Event.from_json((await recalls.next_msg(timeout=30)).data)
                    if recall.binding_id == question.binding_id:
                        break
        finally:
            await nc.close()
        # The acceptance line's own command reads the same report from the event log.
        code, out = await home.cli(
            "events", "--subject", "events.workspace.*.out.recall.>", "--json"
        )

    biscuit = {i for i, fact in deposited.items() if "Biscuit" in fact}
    assert biscuit & set(recall.payload["injected_ids"]), (deposited, recall.payload)
    assert code == 0, out
    logged = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    (entry,) = [e for e in logged if question.binding_id in json.dumps(e)]
    assert biscuit & set(entry["event"]["payload"]["injected_ids"]), entry
