"""``home memory calibrate``: from the ledger a real reflex wrote to a table, JSON and PNG."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from home.jmfts.testing import RunningJmfts
from home.memory.calibrate import best_separation, collect
from home.memory.recall import RECALL_HEADER
from shared.schema.catalog import NodeCatalog
from tests.home.memory.conftest import (
    AGENT,
    Brain,
    edge_for,
    memory_agent,
    reflex_spec,
    until,
    user_texts,
)
from tests.support.scripted_model import RecordedRequest

ROOT = f"workspace/{AGENT}"


def home_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from home.cli import main; main()", "memory", "calibrate", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def answer_from_memory(request: RecordedRequest) -> str:
    """Speak the first memory recalled this turn back, if one was shown (so the reply uses it)."""
    for text in reversed(user_texts(request)):
        if text.startswith(RECALL_HEADER):
            return "From memory: " + text.splitlines()[1].split(") ", 1)[1]
    return "I have nothing on that."


def test_the_suggestion_separates_used_hits_from_the_others() -> None:
    threshold, j = best_separation([0.6, 0.7, 0.8], [0.2, 0.3, 0.62])
    assert threshold == 0.6 and round(j, 3) == round(1 - 1 / 3, 3)
    records = [
        {"kind": "search", "search_id": "s1", "threshold": 0.5, "hits": [
            {"id": 1, "score": 0.35, "raw_score": 0.7, "passed": True},
            {"id": 2, "score": 0.55, "passed": True},
            {"id": 3, "score": 0.2, "raw_score": 0.2, "passed": False}]},
        {"kind": "use", "search_id": "s1", "used_ids": [1], "unused_ids": [2]},
        {"kind": "search", "search_id": "s2", "threshold": 0.5, "hits": [
            {"id": 2, "score": 0.52, "passed": True}]},
    ]  # fmt: skip
    calibration = collect(records)
    # The cosine the gate compared (raw_score), not the decayed rank score; a ledger line
    # without one (written before decay only ranked) reads its score.
    assert calibration.scores == {"used": [0.7], "shown_unused": [0.55, 0.52], "not_shown": [0.2]}
    assert calibration.suggested == 0.7 and calibration.separation == 1.0
    assert collect(records[1:2]).suggested is None


async def test_calibrate_reads_what_the_reflex_recorded(
    catalog: NodeCatalog, nats_url: str, jmfts: RunningJmfts, brain: Brain, tmp_path: Path
) -> None:
    token = await jmfts.principal(AGENT, [ROOT])
    for fact in (
        "The user's daughter plays the cello.",
        "The user's car is a red Volvo estate.",
        "The user is allergic to peanuts.",
    ):
        await jmfts.write(ROOT, fact)
    brain.speak = answer_from_memory
    home = tmp_path / "home"
    spec = reflex_spec(catalog, every_n=0, threshold=0.35)
    questions = [
        "what instrument does my daughter play",
        "what colour is my car",
        "what am I allergic to",
        "how tall is the Eiffel tower",
    ]
    async with (
        edge_for(nats_url) as edge,
        memory_agent(
            spec, nats_url=nats_url, jmfts=jmfts, token=token, brain=brain, data_dir=home
        ) as node,
    ):
        for question in questions:
            await edge.say(question)
        await until(lambda: len(node.stats.outcomes) == len(questions))

    plot = tmp_path / "cal.png"
    done = home_cli(AGENT, "--data-dir", str(home), "--plot", str(plot), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["searches"] == len(questions)
    assert report["current_threshold"] == 0.35
    categories = report["categories"]
    assert categories["used"]["n"] >= 3
    assert categories["not_shown"]["n"] >= 3
    assert categories["used"]["min"] >= 0.35
    assert 0.35 <= report["suggested_threshold"] <= 1.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    table = home_cli(AGENT, "--data-dir", str(home), "--plot", str(tmp_path / "t.png"))
    assert table.returncode == 0 and "suggested threshold" in table.stdout

    missing = home_cli("nobody", "--data-dir", str(home))
    assert missing.returncode == 2 and "no ledger for agent 'nobody'" in missing.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert home_cli(AGENT, "--ledger", str(empty)).returncode == 1
