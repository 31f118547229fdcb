"""The curator inside a real `home up` (the shipped `edge_asr_memory` schema): a memory
planted twice in the agent's workspace is merged into one when the next turn's memorize
report wakes `agent.memory_curator`, and `home timeline` and `home memory show` say so.

The edge is played on home's NATS; the scripted model (the one double) answers the turn
and its evaluation keeps the fact said, so the turn deposits a memory and its report
wakes the curator.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from home.memory.evaluator import EVALUATOR_MARKER
from tests.home.test_home_delegation import ask_and_listen, store_fact
from tests.support.home_up import RunningHome, running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel, content_text

pytestmark = pytest.mark.slow
AGENT = "edge_asr_memory"
SAID = "The user's dog is called Biscuit."
KEPT = "The user's cat is called Miso."


def answers(request: RecordedRequest) -> Reply:
    """Turns are answered aloud; the reflex's evaluation keeps what was said."""
    system = "".join(
        content_text(m.get("content")) for m in request.messages if m.get("role") == "system"
    )
    if EVALUATOR_MARKER in system:
        return Reply.say(f"- {KEPT}")
    return Reply.call("speak", {"text": "Hello."})


async def merged_lines(home: RunningHome) -> list[dict[str, Any]]:
    code, out = await home.cli("timeline", "--json")
    assert code == 0, out
    lines: list[dict[str, Any]] = json.loads(out)
    return [line for line in lines if line["kind"] == "merged"]


async def test_a_deposit_wakes_the_curator_which_merges_a_planted_duplicate(
    tmp_path: Path,
) -> None:
    async with (
        ScriptedModel(responder=answers) as model,
        running_home(tmp_path / "home", model.url, apply=(AGENT,)) as home,
    ):
        first = await store_fact(home, AGENT, SAID, "memory:person")
        again = await store_fact(home, AGENT, SAID, "memory:person")
        binding_id, said = await ask_and_listen(
            home.nats_url, "my cat is called miso", 1, within_s=120
        )
        assert said == ["Hello."]
        merged: list[dict[str, Any]] = []
        for _ in range(120):  # the report reaches the curator after the turn is answered
            merged = await merged_lines(home)
            if merged:
                break
            await asyncio.sleep(0.5)
        code, shown = await home.cli("memory", "show", str(again), "--json")
        _, timeline = await home.cli("timeline", "--json")

    kept = [ln for ln in json.loads(timeline) if ln["kind"] == "kept"]
    assert [ln["text"] for ln in kept] == [f"{KEPT} (person)"], "the deposit that woke it"
    (line,) = merged
    assert line["ref"] == f"#{again}" and line["agent"] == AGENT, line
    assert line["binding_id"] == binding_id, "the turn whose report woke the curator"
    assert f"merged into #{first}" in line["text"], line
    assert code == 0, shown
    origin = json.loads(shown)
    (retraction,) = origin["retracted_by"]
    assert retraction["content"].startswith(f"merged into #{first}")
    assert retraction["binding_id"] == binding_id
