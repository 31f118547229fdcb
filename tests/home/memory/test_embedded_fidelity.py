"""Issue 40's acceptance line with the real embedded model (SmolLM2-135M): memory keeps what
was said.

`home up --apply edge_asr_memory` with its defaults, `edge say` as the board (the real
SSH bridge): "Remember this: my sister Ingrid lives in Trondheim.", three other turns,
then "Where does my sister Ingrid live?". The memory stored is the user's own words (no
model asked, nothing refused), the last turn's recall injects it, and the spoken answer
names Trondheim. Before, the same turns stored "The user's name: Theresa" and the answer
was "My sister Ingrid lives in a small village."
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import nats
import pytest

from home.memory.fidelity import check
from shared.nats_confirm import confirm_subscriptions
from tests.home.memory.test_embedded_correction import report_for
from tests.support.home_up import RunningHome, running_home

pytestmark = pytest.mark.slow
AGENT = "edge_asr_memory"
BIN = Path(sys.executable).parent
FACT = "Remember this: my sister Ingrid lives in Trondheim."
OTHERS = ("what should I cook tonight", "tell me a joke", "is it going to rain")
QUESTION = "Where does my sister Ingrid live?"


async def edge_say(home: RunningHome, text: str) -> dict[str, Any]:
    """``edge say TEXT --data-dir HOME --json``: one turn as the board, its answer."""
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "edge"), "say", text, "--data-dir", str(home.data_dir), "--json",
        "--timeout", "120",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()
    said: dict[str, Any] = json.loads(out)
    return said


async def test_a_fact_said_once_is_stored_in_its_words_recalled_and_answered(
    tmp_path: Path,
) -> None:
    async with running_home(tmp_path / "home", None, apply=(AGENT,)) as home:
        nc = await nats.connect(home.nats_url)
        try:
            recalls = await nc.subscribe("events.workspace.*.out.recall.>")
            memorized = await nc.subscribe("events.workspace.*.out.memorize.>")
            await confirm_subscriptions(nc)
            fact = await edge_say(home, FACT)
            stored = await report_for(memorized, fact["binding_id"], 120)
            for text in OTHERS:
                await edge_say(home, text)
            asked = await edge_say(home, QUESTION)
            recall = await report_for(recalls, asked["binding_id"], 30)
        finally:
            await nc.close()
        code, audit = await home.cli("memory", "audit", "--agent", AGENT, "--json")

    payload = stored.payload
    assert payload["status"] == "deposited" and payload["refused"] == [], payload
    (memory,) = payload["queries"]
    assert memory == "The user's sister Ingrid lives in Trondheim.", payload
    assert check(memory, [FACT]).faithful
    assert [d["path"] for d in payload["deposits"]] == ["draft"]
    assert set(payload["document_ids"]) <= set(recall.payload["injected_ids"]), recall.payload
    answer = asked["answer"]["text"]
    assert "trondheim" in answer.lower(), asked
    # Nothing stored along the way carries a word nobody said.
    assert code == 0, audit
    assert json.loads(audit)["invented"] == 0, audit
