"""The JetStream event log: `home events` filters and `home trace` of one synthetic turn."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from home.substrate.eventlog import _logged, event_summary, read_log, trace
from shared import control
from shared.control import StatusChange
from shared.event import Event
from shared.subjects import sensation_turn_subject, speech_completed_subject
from tests.home.substrate.conftest import Home, running_pid, wait_for

STREAM = "EVENTS"


async def run_cli(*args: str) -> tuple[int, str, str]:
    """Run the real `home` CLI in a subprocess."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "home.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode(), err.decode()


async def synthetic_turn(home: Home) -> str:
    """Sensation → route → outbound (the echo node's speak, resolved) → ack; its binding_id."""
    await home.request(control.SCHEMA_APPLY, name="talk")
    await running_pid(home, "svc.echo")
    spoken = await home.nc.subscribe("events.workspace.echo.out.speak.tui")
    await home.nc.flush()
    await home.nc.publish(
        sensation_turn_subject("tui"),
        Event.new(
            "sensation.turn",
            {"text": "what time is it"},
            source="edge.audio.tui",
            sequence_number=1,
        ).to_json(),
    )
    speak = Event.from_json((await spoken.next_msg(timeout=10)).data)
    assert speak.binding_id is not None
    ack = Event.new(
        "speech.completed",
        {"ok": True},
        source="edge.audio.tui",
        sequence_number=2,
        binding_id=speak.binding_id,
    )
    await home.nc.publish(speech_completed_subject(speak.binding_id), ack.to_json())
    # Another turn (its own binding_id) must not show up in this one's trace.
    await home.nc.publish(
        sensation_turn_subject("board"),
        Event.new(
            "sensation.turn",
            {"text": "other"},
            source="edge.audio.board",
            sequence_number=1,
            binding_id="someone-else",
        ).to_json(),
    )
    await home.nc.flush()
    return speak.binding_id


async def test_trace_reconstructs_one_turn_in_order(home: Home) -> None:
    binding_id = await synthetic_turn(home)

    async def complete() -> bool:
        return len(await trace(home.nc, STREAM, binding_id)) == 5

    await wait_for(complete, "the five events of the turn in the log")
    found = await trace(home.nc, STREAM, binding_id)
    assert [item.subject for item in found] == [
        "events.sensation.tui.turn",  # as published, before the router minted the id
        "events.workspace.echo.in",
        "events.workspace.echo.out.speak",
        "events.workspace.echo.out.speak.tui",
        f"events.action.speech.completed.{binding_id}",
    ]
    assert found[0].event is not None and found[0].event.binding_id is None
    assert found[1].event is not None and found[1].event.event_id == found[0].event.event_id
    times = [item.time for item in found]
    assert times == sorted(times)


async def test_events_filters_by_subject_and_binding(home: Home) -> None:
    binding_id = await synthetic_turn(home)

    async def logged() -> bool:
        return len([e async for e in read_log(home.nc, STREAM)]) >= 9

    await wait_for(logged, "the turn and the unrelated event in the log")
    log_status = (await home.request(control.STATUS))["event_log"]
    assert log_status["stream"] == STREAM and log_status["messages"] >= 9
    assert log_status["events_per_s"] >= 0.0
    sensations = [e async for e in read_log(home.nc, STREAM, subject="events.sensation.>")]
    assert [e.subject for e in sensations] == [
        "events.sensation.tui.turn",
        "events.sensation.board.turn",
    ]
    by_binding = [e async for e in read_log(home.nc, STREAM, binding_id="someone-else")]
    assert [e.subject for e in by_binding] == [
        "events.sensation.board.turn",
        "events.workspace.echo.in",
        "events.workspace.echo.out.speak",
        "events.workspace.echo.out.speak.board",
    ]
    assert [e async for e in read_log(home.nc, STREAM, subject="events.nothing.>")] == []

    data_dir = str(home.config.data_dir)
    code, out, err = await run_cli("trace", binding_id, "--data-dir", data_dir, "--json")
    assert code == 0, err
    assert [item["subject"] for item in json.loads(out)][
        -1
    ] == f"events.action.speech.completed.{binding_id}"
    code, out, _ = await run_cli("trace", binding_id, "--data-dir", data_dir)
    assert code == 0 and "Δms" in out and "speech.completed" in out
    code, out, _ = await run_cli(
        "events", "--data-dir", data_dir, "--subject", "events.sensation.>", "--json"
    )
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["event"]["payload"]["text"] for line in lines] == ["what time is it", "other"]
    code, _, err = await run_cli("trace", "no-such-turn", "--data-dir", data_dir)
    assert code == 1 and "no event of binding no-such-turn" in err


async def test_follow_prints_new_events_as_they_arrive(home: Home, tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "home.cli",
        "events",
        "--follow",
        "--json",
        "--data-dir",
        str(home.config.data_dir),
        "--subject",
        "events.sensation.>",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        for text in ("one", "two"):
            await asyncio.sleep(0.2)
            await home.nc.publish(
                sensation_turn_subject("tui"),
                Event.new(
                    "sensation.turn", {"text": text}, source="t", sequence_number=1
                ).to_json(),
            )
        seen = []
        for _ in range(2):
            line = await asyncio.wait_for(proc.stdout.readline(), 15)
            seen.append(json.loads(line)["event"]["payload"]["text"])
        assert seen == ["one", "two"]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


def test_a_poisoned_message_in_the_log_is_shown_as_unparseable() -> None:
    """Before: RecursionError, and `home events`/`home trace` exited 1 while it stayed logged."""
    for raw in (
        b'{"payload": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        json.dumps(
            Event.new("t", {}, source="s", sequence_number=1).to_dict() | {"ttl_ms": 10**17}
        ).encode(),
    ):
        logged = _logged(7, datetime.now(UTC), "events.sensation.tui.turn", raw)
        assert logged.event is None
        assert event_summary(logged).startswith("unparseable: envelope key")


async def test_a_deleted_event_log_is_reported_and_recreated(home: Home) -> None:
    """Before: after $JS.API.STREAM.DELETE.EVENTS home stayed green and nothing remade it."""
    changes = await home.nc.subscribe("home.status.component.substrate")
    await home.nc.flush()
    js = home.nc.jetstream()
    await js.delete_stream(STREAM)
    unhealthy: list[StatusChange] = []
    while not unhealthy:
        change = StatusChange.from_json((await changes.next_msg(timeout=10)).data)
        if change.state == "unhealthy":
            unhealthy.append(change)
    assert f"event log stream {STREAM} was missing" in unhealthy[0].reason
    await js.stream_info(STREAM)  # back already
    await home.nc.publish(sensation_turn_subject("tui"), b"{}")

    async def logged_again() -> bool:
        log_status = (await home.request(control.STATUS))["event_log"]
        return bool(log_status["messages"] >= 1 and log_status["recreated"] == 1)

    await wait_for(logged_again, "the recreated stream to record again")
    await changes.unsubscribe()
