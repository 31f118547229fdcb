"""``home memory forget|show|due`` against a real JMFTS server, as the admin."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from home.jmfts.testing import RunningJmfts
from home.memory.provenance import Provenance
from home.memory.recall import RANK_FLOOR

ROOT = "workspace/cli_agent"


async def home_memory(jmfts: RunningJmfts, data_dir: Path, *args: str) -> tuple[int, str]:
    token = jmfts.server.admin_token_file
    assert token is not None
    run = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "memory", *args,
        "--url", jmfts.url, "--token-file", str(token), "--data-dir", str(data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, _ = await run.communicate()
    return run.returncode or 0, out.decode()


async def test_forget_retracts_and_the_memory_stays_in_history(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    doc = await jmfts.write(ROOT, "The user's boat is called Wren.")
    before = datetime.now(UTC)
    await asyncio.sleep(0.01)
    code, out = await home_memory(jmfts, tmp_path, "forget", str(doc), "--json")
    assert code == 0, out
    done = json.loads(out)
    assert done["id"] == doc and done["action"] == "retracted", done

    async def found(*extra: str) -> set[int]:
        code, out = await home_memory(
            jmfts, tmp_path, "search", "boat", "--method", "vector", "--json", *extra
        )
        assert code == 0, out
        return {hit["id"] for hit in json.loads(out)["results"]}

    assert doc not in await found()
    assert doc in await found("--as-of", before.isoformat())


async def test_forget_of_an_unknown_memory_fails_naming_it(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    code, out = await home_memory(jmfts, tmp_path, "forget", "999999")
    assert code == 1 and "999999" in out, out


async def test_show_prints_where_a_memory_came_from(jmfts: RunningJmfts, tmp_path: Path) -> None:
    parent = await jmfts.ensure_path(ROOT)
    origin = Provenance(
        agent="cli_agent",
        written_by="agent.cli_agent.memory_reflex",
        binding_id="b" * 32,
        produced_by_schema="edge_asr_memory",
        evaluation_id="e1",
    )
    written = await jmfts._call(
        "POST",
        "/documents",
        json={
            "parent_id": parent,
            "content": "The user's dog is called Rex.",
            "structured_content": origin.structured_content(),
        },
    )
    code, out = await home_memory(jmfts, tmp_path, "show", str(written["id"]))
    assert code == 0, out
    assert "The user's dog is called Rex." in out and "edge_asr_memory" in out
    assert f"home trace {'b' * 32}" in out and "evaluation e1" in out, out
    code, out = await home_memory(jmfts, tmp_path, "show", str(written["id"]), "--json")
    assert json.loads(out)["provenance"]["binding_id"] == "b" * 32


async def test_due_lists_a_sunken_memory_with_its_rank_weight_and_a_fresh_one_not(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    old = datetime.now(UTC) - timedelta(days=30)
    fading = await jmfts.write(ROOT, "The user's gym day is Monday.", event_time=old)
    await jmfts.write(ROOT, "The user's car is a red Fiat.")
    code, out = await home_memory(jmfts, tmp_path, "due", "cli_agent", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["checked"] == 2
    assert [d["id"] for d in report["due"]] == [fading], report
    (due,) = report["due"]
    assert due["days_left"] == 0.0 and due["retrievability"] < 0.9
    assert due["rank_weight"] == pytest.approx(
        RANK_FLOOR + (1 - RANK_FLOOR) * due["retrievability"], abs=1e-3
    )


async def test_audit_lists_what_nobody_said_and_retract_removes_it_with_why(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    parent = await jmfts.ensure_path(ROOT)

    async def memory(
        content: str,
        said: tuple[str, ...] = (),
        binding: str | None = None,
        writer: str = "agent.cli_agent.memory_reflex",
    ) -> int:
        origin = Provenance(
            agent="cli_agent", written_by=writer, binding_id=binding, said=said,
            extracted_by="model" if said else None,
        )  # fmt: skip
        body = {"parent_id": parent, "content": content}
        written = await jmfts._call(
            "POST", "/documents", json={**body, "structured_content": origin.structured_content()}
        )
        return int(written["id"])

    said = await memory(
        "The user's sister Ingrid lives in Trondheim.", ("my sister ingrid lives in trondheim",)
    )
    theresa = await memory(
        "The user's name: Theresa", ("Remember this: my sister Ingrid lives in Trondheim.",)
    )
    # Written before memories named their sources: the turn ledger has the turn's words.
    drink = await memory("The user's favorite drink.", binding="c" * 32)
    unknown = await memory("The user's car is blue.", binding="d" * 32)
    await memory("The boiler was serviced.", writer="agent.cli_agent.jmfts_write")
    turns = tmp_path / "agents" / "cli_agent" / "turns.jsonl"
    turns.parent.mkdir(parents=True)
    turn = {"session_id": "s", "binding_id": "c" * 32, "device": "tui", "at": "t"}
    turns.write_text(json.dumps({**turn, "text": "I like green tea."}) + "\n{not json\n")

    code, out = await home_memory(jmfts, tmp_path, "audit", "--agent", "cli_agent", "--json")
    assert code == 1, out  # findings
    assert "turns.jsonl:2: not JSON" in out, out  # the cut line is named, and passed over
    report = json.loads(out.splitlines()[-1])
    verdicts = {m["id"]: m["verdict"] for m in report["memories"]}
    assert verdicts == {
        said: "faithful",
        theresa: "invented",
        drink: "invented",
        unknown: "unverifiable",
    }  # the model's own record is no memory of what was said
    named = {m["id"]: m["invented"] for m in report["memories"]}
    assert named[theresa] == ["name", "theresa"] and named[drink] == ["favorite", "drink"]
    assert (report["invented"], report["unverifiable"], report["checked"]) == (2, 1, 4)

    code, out = await home_memory(
        jmfts, tmp_path, "audit", "--agent", "cli_agent", "--retract", "--json"
    )
    assert code == 1, out
    retractions = {
        m["id"]: m["retraction_id"] for m in json.loads(out.splitlines()[-1])["memories"]
    }
    assert retractions[said] is None and retractions[unknown] is None
    why = await jmfts.document(retractions[theresa])
    assert "theresa" in why["content"] and "Ingrid" in why["content"], why

    code, out = await home_memory(jmfts, tmp_path, "audit", "--agent", "cli_agent")
    assert code == 0, out  # what is left holds only what was said (or cannot be checked)
    assert "0 of 2 memories carry words nobody said (1 unverifiable)" in out, out
