"""The acceptance lines of the verbs by voice, through a real `home up` with its embedded
defaults (SmolLM2-135M, no `--llm-url`): a reminder said about a minute later on the
device that asked, across a restart of home; a note in the agent's journal under the
turn's binding id; a question for the operator answered from memory; "forget that"
retracting what the turn before kept, on record and undoable.

The reminder is said and heard with `edge say` through home's bridge, as a user would;
the other turns are played on home's NATS as the board's bridge half would
(`play_edge_turn`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription

from shared.event import Event
from shared.nats_confirm import confirm_subscriptions
from shared.proc import free_port
from shared.subjects import speak_subject
from tests.home.test_home_turn import play_edge_turn
from tests.support.home_up import RunningHome, running_home

pytestmark = pytest.mark.slow
AGENT = "edge_asr_memory"
DEVICE = "board"
BIN = Path(sys.executable).parent


async def cli_json(home: RunningHome, *args: str) -> dict[str, object]:
    code, out = await home.cli(*args, "--json")
    assert code == 0, out
    (line,) = [line for line in out.splitlines() if line.startswith("{")]
    parsed: dict[str, object] = json.loads(line)
    return parsed


async def edge_say(data_dir: Path, text: str, *args: str) -> dict[str, Any]:
    """`edge say TEXT --json` as a user runs it: paired through home's bridge, over SSH."""
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "edge"), "say", text, "--data-dir", str(data_dir), "--json", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-2000:]
    said: dict[str, Any] = json.loads(out)
    return said


async def test_a_reminder_is_said_on_its_device_after_a_restart_of_home(tmp_path: Path) -> None:
    data_dir = tmp_path / "home"
    # One port across the restart, as a user's home keeps its default: the pairing names it.
    port = free_port()
    async with running_home(data_dir, None, bridge_port=port, apply=(AGENT,)) as home:
        said = await edge_say(data_dir, "remind me in one minute to check the oven")
        set_at = datetime.now(UTC)
        assert said["answer"]["agent"] == AGENT, said
        assert "check the oven" in said["answer"]["text"], said
        assert "1 minute" in said["answer"]["text"], said
        listed = await cli_json(home, "reminders", "list")
        (pending,) = listed["reminders"]  # type: ignore[misc]
        assert pending["device"] == said["device"] and pending["text"] == "check the oven"
        assert pending["binding_id"] == said["binding_id"]

    # home stopped and started again: nothing but the stream kept the reminder. The board
    # comes back and talks; home says the reminder to it at its time, of its own accord.
    async with running_home(data_dir, None, bridge_port=port, apply=(AGENT,)) as home:
        back = await edge_say(data_dir, "hello", "--listen", "150", "--until", "oven")
        (reminder,) = [x for x in back["later"] if "oven" in x["text"]]
        assert reminder["text"] == "Reminder: check the oven."
        assert reminder["binding_id"] not in (said["binding_id"], back["binding_id"])
        heard_at = datetime.fromisoformat(reminder["at"])
        # Said at its time: not before the minute, and not long after (home's restart).
        assert 55 <= (heard_at - set_at).total_seconds() <= 150
        listed = await cli_json(home, "reminders", "list")
        assert listed["reminders"] == []


async def note_the_boiler(home: RunningHome, notes: Subscription) -> None:
    """A note goes to the agent's journal under the turn's binding id."""
    _, noted, turn = await play_edge_turn(
        home.nats_url, "note that the boiler was serviced today", 60, DEVICE
    )
    assert noted.payload["text"] == "Noted: the boiler was serviced today.", noted.payload
    ack = Event.from_json((await notes.next_msg(timeout=30)).data)
    assert ack.binding_id == turn.binding_id and ack.payload["ok"], ack.payload
    entry = await cli_json(home, "memory", "show", str(ack.payload["doc_id"]))
    assert "boiler was serviced today" in str(entry["content"])
    assert entry["provenance"]["binding_id"] == turn.binding_id  # type: ignore[index]
    assert entry["provenance"]["written_by"] == "effector.journal_append"  # type: ignore[index]


async def ask_about_the_car(home: RunningHome, nc: NatsClient, memorized: Subscription) -> None:
    """The operator, whose small model searches nothing, answers through its node."""
    await play_edge_turn(home.nats_url, "my car is a blue volvo", 90, DEVICE)
    car = Event.from_json((await memorized.next_msg(timeout=120)).data)
    assert car.payload["deposits"], car.payload
    speaks = await nc.subscribe(speak_subject(AGENT, DEVICE))
    await confirm_subscriptions(nc)
    _, asked, turn = await play_edge_turn(
        home.nats_url, "ask the operator what I said about my car", 60, DEVICE
    )
    assert "asked the operator" in asked.payload["text"], asked.payload
    async with asyncio.timeout(120):
        while True:
            answer = Event.from_json((await speaks.next_msg(timeout=120)).data)
            if answer.binding_id == turn.binding_id and "operator says" in answer.payload["text"]:
                break
    await speaks.unsubscribe()
    assert "volvo" in answer.payload["text"].lower(), answer.payload


async def test_notes_questions_for_the_operator_and_forget_that_by_voice(tmp_path: Path) -> None:
    async with running_home(tmp_path / "home", None, apply=(AGENT,)) as home:
        nc = await nats.connect(home.nats_url)
        try:
            notes = await nc.subscribe("events.journal.append.*")
            memorized = await nc.subscribe(f"events.workspace.{AGENT}.out.memorize.{DEVICE}")
            recalls = await nc.subscribe(f"events.workspace.{AGENT}.out.recall.{DEVICE}")
            await confirm_subscriptions(nc)
            await note_the_boiler(home, notes)
            await ask_about_the_car(home, nc, memorized)

            await play_edge_turn(home.nats_url, "my locker code is 4512", 90, DEVICE)
            async with asyncio.timeout(120):
                report = Event.from_json((await memorized.next_msg(timeout=120)).data)
            kept = [d["id"] for d in report.payload["deposits"]]
            assert kept and report.payload["status"] == "deposited", report.payload

            _, forgot, forget_turn = await play_edge_turn(home.nats_url, "forget that", 60, DEVICE)
            assert "forgotten" in forgot.payload["text"], forgot.payload

            _, _, question = await play_edge_turn(
                home.nats_url, "what is my locker code", 90, DEVICE
            )
            async with asyncio.timeout(30):
                while True:
                    recall = Event.from_json((await recalls.next_msg(timeout=30)).data)
                    if recall.binding_id == question.binding_id:
                        break
        finally:
            await nc.close()
        assert not set(kept) & set(recall.payload["injected_ids"]), recall.payload
        shown = await cli_json(home, "memory", "show", str(kept[0]))
        (retraction,) = shown["retracted_by"]  # type: ignore[misc]
        assert retraction["binding_id"] == forget_turn.binding_id
        assert "forgotten by voice on board" in retraction["content"]
        # Undone from the CLI: the memory is recalled again.
        restored = await cli_json(home, "memory", "restore", str(kept[0]))
        assert restored["retraction_id"] == retraction["id"]
        _, _, again = await play_edge_turn(home.nats_url, "what is my locker code", 90, DEVICE)
        code, out = await home.cli(
            "events", "--subject", f"events.workspace.{AGENT}.out.recall.{DEVICE}", "--json"
        )
        timeline_code, timeline_out = await home.cli(
            "timeline", "--agent", AGENT, "--since", "1h", "--json"
        )
    assert code == 0, out
    # One dated list: the turn, what was kept off it, its forgetting (on the device it was
    # said on) and its restoring (by hand: on no device).
    assert timeline_code == 0, timeline_out
    (listed,) = [line for line in timeline_out.splitlines() if line.startswith("[")]
    said = [(ln["kind"], ln["ref"], ln["device"]) for ln in json.loads(listed)]
    memory = f"#{kept[0]}"
    assert ("kept", memory, DEVICE) in said, said
    assert ("forgotten", memory, DEVICE) in said, said
    assert ("restored", f"#{restored['restored_id']}", None) in said, said
    order = [kind for kind, ref, _ in said if ref == memory]
    assert order.index("kept") < order.index("forgotten"), said
    assert ("turn", forget_turn.binding_id, DEVICE) in said, said
    logged = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    (entry,) = [e for e in logged if again.binding_id in json.dumps(e)]
    assert restored["restored_id"] in entry["event"]["payload"]["injected_ids"], entry
