"""Issue 17's acceptance line for corrections, with the real embedded model (SmolLM2-135M).

`home up` defaults and `edge_asr_memory`: "my dog is called Biscuit", three unrelated
questions, "my dog is called Rex now", then "what is my dog called". The last turn's recall
injects the Rex memory and not Biscuit; the three questions deposited nothing; and
`home memory search --as-of` a time before the correction still finds Biscuit. The Rex
memory carries its audit thread (`home memory show`) and `home trace` lists it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from nats.aio.subscription import Subscription

from shared.event import Event
from shared.nats_confirm import confirm_subscriptions
from tests.home.test_home_turn import play_edge_turn
from tests.support.home_up import RunningHome, running_home

pytestmark = pytest.mark.slow
AGENT = "edge_asr_memory"
QUESTIONS = ("what should I cook tonight", "tell me a joke", "is it going to rain")


async def report_for(sub: Subscription, binding_id: str, within_s: float) -> Event:
    """The next report on ``sub`` that belongs to the turn ``binding_id``."""
    async with asyncio.timeout(within_s):
        while True:
            report = Event.from_json((await sub.next_msg(timeout=within_s)).data)
            if report.binding_id == binding_id:
                return report


async def memory_cli(home: RunningHome, *args: str) -> tuple[int, str]:
    """``home memory ...`` against the running home's JMFTS (found through --data-dir)."""
    return await home.cli("memory", *args)


async def test_a_correction_replaces_the_memory_it_corrects(tmp_path: Path) -> None:
    async with running_home(tmp_path / "home", None, apply=(AGENT,)) as home:
        nc = await nats.connect(home.nats_url)
        try:
            recalls = await nc.subscribe("events.workspace.*.out.recall.>")
            memorized = await nc.subscribe("events.workspace.*.out.memorize.>")
            await confirm_subscriptions(nc)

            _, _, fact = await play_edge_turn(home.nats_url, "my dog is called Biscuit", 90)
            first = await report_for(memorized, str(fact.binding_id), 120)
            questions = []
            for text in QUESTIONS:
                _, _, turn = await play_edge_turn(home.nats_url, text, 90)
                questions.append(await report_for(memorized, str(turn.binding_id), 120))
            before_correction = datetime.now(UTC)

            _, _, fix = await play_edge_turn(home.nats_url, "my dog is called Rex now", 90)
            corrected = await report_for(memorized, str(fix.binding_id), 120)
            _, _, ask = await play_edge_turn(home.nats_url, "what is my dog called", 90)
            recall = await report_for(recalls, str(ask.binding_id), 30)
        finally:
            await nc.close()

        (biscuit,) = first.payload["deposits"]
        assert first.payload["status"] == "deposited" and biscuit["action"] == "created"
        assert "Biscuit" in first.payload["queries"][0], first.payload
        for report in questions:
            assert report.payload["status"] == "nothing", report.payload
            assert report.payload["deposits"] == [], report.payload
        (rex,) = corrected.payload["deposits"]
        assert "Rex" in corrected.payload["queries"][0], corrected.payload
        assert rex["action"] == "corrected" and rex["supersedes"] == biscuit["id"], (
            first.payload,
            corrected.payload,
        )

        injected = recall.payload["injected_ids"]
        assert rex["id"] in injected and biscuit["id"] not in injected, recall.payload

        code, out = await memory_cli(
            home, "search", "dog", "--method", "vector", "--json",
            "--as-of", before_correction.isoformat(),
        )  # fmt: skip
        assert code == 0, out
        then = {hit["id"] for hit in json.loads(out)["results"]}
        assert biscuit["id"] in then and rex["id"] not in then, out
        code, out = await memory_cli(home, "search", "dog", "--method", "vector", "--json")
        now = {hit["id"] for hit in json.loads(out)["results"]}
        assert rex["id"] in now and biscuit["id"] not in now, out

        code, out = await memory_cli(home, "show", str(rex["id"]), "--json")
        assert code == 0, out
        thread = json.loads(out)["provenance"]
        assert thread["binding_id"] == fix.binding_id and thread["agent"] == AGENT, thread
        assert thread["produced_by_schema"] == AGENT, thread
        assert thread["evaluation_id"] == corrected.payload["evaluation_id"], thread
        assert corrected.produced_by_schema == AGENT

        code, out = await home.cli("trace", str(fix.binding_id))
        assert code == 0, out
        assert f"#{rex['id']}" in out and "corrected" in out and f"#{biscuit['id']}" in out, out
