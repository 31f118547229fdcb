"""One memory for a home of three members, and a member wiped and joined again.

Each member runs ``home up`` with its memory server; every write goes through the
replicated ``JMFTS_LOG`` stream and every member applies it
(home/jmfts/replicated_log.py). Memories written through two members are found by
``home memory search`` on all three, with the same answers; then m3 is stopped, its
memory directory deleted, and m3 started again: it catches up from the log and
answers the same queries as the others, and a memory written after it came back,
on another member, is found on it too.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from home.jmfts.locate import HOME_SUBDIR
from tests.support.home_cluster import Member, home_cluster, start_member, wait_for
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.slow

QUERIES = ("where does Ana live", "what is the cat called", "when do the bins go out")
FACTS = {
    "knowledge/household/ana": "Ana, the user's sister, lives in Lyon since March.",
    "knowledge/household/cat": "The cat is called Miso and sleeps on the radiator.",
    "knowledge/household/bins": "The bins go out on Tuesday evenings.",
    "knowledge/household/car": "The car is a blue 2012 Yaris parked on Rue Neuve.",
}
AGREE_TIMEOUT_S = 60.0


async def home_cli(member: Member, *args: str) -> Any:
    """``home <args> --data-dir <member's> --json`` as a user types it; its JSON answer."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", *args, "--data-dir", str(member.data_dir), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, f"home {' '.join(args)} on {member.name}: {err.decode()}"
    return json.loads(out)


async def answers(member: Member) -> list[list[tuple[Any, ...]]]:
    """What ``home memory search`` finds on ``member`` for every query."""
    found = []
    for query in QUERIES:
        result = await home_cli(member, "memory", "search", query, "--limit", "3")
        found.append([(hit["id"], hit["title"], hit["score"]) for hit in result["results"]])
    return found


async def agree(members: list[Member], expected_hits: int) -> list[list[tuple[Any, ...]]]:
    """Until every member answers the queries alike (each query with ``expected_hits``)."""
    async with asyncio.timeout(AGREE_TIMEOUT_S):
        while True:
            seen = [await answers(member) for member in members]
            complete = all(len(hits) == expected_hits for hits in seen[0])
            if complete and all(other == seen[0] for other in seen[1:]):
                return seen[0]
            await asyncio.sleep(1.0)


async def test_a_wiped_member_catches_up_and_answers_as_the_others(tmp_path: Path) -> None:
    async with (
        ScriptedModel() as model,
        home_cluster(tmp_path, model.url, {}, memory=True) as members,
    ):
        m1, m2, m3 = members
        writers = [m1, m2]
        for n, (path, text) in enumerate(FACTS.items()):
            await home_cli(writers[n % 2], "memory", "put", path, text)
        before = await agree(members, expected_hits=3)
        assert "ana" in [title for _, title, _ in before[0]]

        assert m3.proc is not None
        m3.proc.terminate()
        await asyncio.wait_for(m3.proc.wait(), 60)
        shutil.rmtree(m3.data_dir / HOME_SUBDIR)
        await start_member(m3, model.url, [m1], [], memory=True)
        await wait_for(members, alive=3)
        assert await agree(members, expected_hits=3) == before

        await home_cli(m2, "memory", "put", "knowledge/household/boiler",
                       "The boiler is serviced every October by Mr Costa.")  # fmt: skip
        async with asyncio.timeout(AGREE_TIMEOUT_S):
            while True:
                found = await home_cli(m3, "memory", "search", "who services the boiler")
                if any(hit["title"] == "boiler" for hit in found["results"]):
                    break
                await asyncio.sleep(0.5)
