"""The Textual app, driven by its pilot against a real nats-server, the test playing the agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import nats
from nats.aio.msg import Msg
from textual.pilot import Pilot

from bridge.node import BridgeCore
from edge.natsd import LocalNatsServer
from edge.tui.app import TetherTui, raw_body
from edge.tui.session import EdgeSession
from shared.event import Event
from shared.messages.history import HistoryReply, HistoryRequest, HistoryTurn, history_subject
from shared.proc import free_port
from shared.subjects import speech_completed_subject
from tests.bridge.servers import make_pair
from tests.edge.tui.conftest import DEVICE, PlayedAgent, until


@asynccontextmanager
async def running_tui(url: str) -> AsyncIterator[tuple[TetherTui, Pilot[None]]]:
    app = TetherTui(EdgeSession(url, DEVICE), transport="direct")
    async with app.run_test(size=(120, 30)) as pilot:
        await until(lambda: app.session.connected and "link up" in app.status_text, "the link")
        yield app, pilot


async def type_line(pilot: Pilot[None], text: str) -> None:
    keys = ["space" if ch == " " else ch for ch in text]
    await pilot.press(*keys, "enter")


async def test_typed_line_becomes_a_turn_and_the_spoken_answer_is_shown_and_acked(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        await type_line(pilot, "what time is it")
        turn = await agent.next_turn()
        assert turn.event_type == "sensation.turn"
        assert turn.payload["text"] == "what time is it"
        assert turn.payload["device"] == DEVICE
        assert turn.binding_id is not None and len(turn.binding_id) == 32

        await agent.speak(turn.binding_id, "It is half past nine.")
        subject, ack = await agent.next_ack()
        assert subject == speech_completed_subject(turn.binding_id)
        assert ack.binding_id == turn.binding_id
        assert ack.event_type == "speech.completed"
        assert ack.payload["ok"] is True and ack.payload["device"] == DEVICE

        shown = app.conversation_text()
        assert "you what time is it" in shown
        assert "edge_asr It is half past nine." in shown
        assert "agent edge_asr" in app.status_text
        assert "last turn -" not in app.status_text


async def test_reply_rail_renders_with_its_reason_and_is_not_acked(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        await type_line(pilot, "show me the table")
        first = await agent.next_turn()
        assert first.binding_id is not None
        await agent.reply(
            first.binding_id, "| a | b |\n| 1 | 2 |", reason="a table is not speakable"
        )
        await until(lambda: "not spoken" in app.conversation_text(), "the reply line")
        assert "[not spoken: a table is not speakable]" in app.conversation_text()
        assert app.session.acked == 0

        await type_line(pilot, "say it then")
        second = await agent.next_turn()
        assert second.binding_id is not None and second.binding_id != first.binding_id
        await agent.speak(second.binding_id, "One and two.")
        _, ack = await agent.next_ack()
        # The first ack on the bus is the speak's: the reply got none.
        assert ack.binding_id == second.binding_id


async def test_memory_reports_are_notes_under_the_turn_of_their_binding(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        await type_line(pilot, "first")
        first = await agent.next_turn()
        await type_line(pilot, "second")
        second = await agent.next_turn()
        assert first.binding_id and second.binding_id
        # Reports for the first turn arrive after the second turn began.
        await agent.recall(first.binding_id, query="first", hits=[0.91, 0.42], passed=1)
        await agent.memorize(first.binding_id, text="noted: the user said first")
        await until(lambda: len(app.conversation.turns[0].notes) == 2, "two notes on turn 1")
        turn1, turn2 = app.conversation.turns
        assert turn1.text == "first" and turn2.text == "second"
        assert [n.kind for n in turn1.notes] == ["recall", "memorize"]
        assert turn2.notes == []
        shown = app.conversation_text()
        assert "· recall: query 'first', 1 of 2 passed" in shown
        assert "· noted: the user said first" in shown
        assert shown.index("noted") < shown.index("you second")


async def test_link_down_and_up_from_bridge_status(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, _pilot):
        await agent.bridge_status(side="edge", state="down", detail="connection refused")
        await until(lambda: "link DOWN" in app.status_text, "link down")
        assert "connection refused" in app.status_text
        assert app.query_one("#status").has_class("down")

        # A home half's report on the same NATS (--direct) is not the TUI's link.
        await agent.bridge_status(side="home", state="up", detail="")
        await agent.bridge_status(side="edge", state="up", rtt_ms=3.5, outbox=2)
        await until(lambda: "link up (bridge tui)" in app.status_text, "link up")
        assert "rtt 3.5 ms" in app.status_text
        assert "queued 2" in app.status_text
        assert not app.query_one("#status").has_class("down")

        # The other spelling of the same event (reachable/reason) reads the same way.
        await agent.bridge_status(reachable=False, reason="home unreachable")
        await until(lambda: "home unreachable" in app.status_text, "link down, other dialect")


async def test_killed_nats_shows_link_down_queues_the_line_and_recovers(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        await nats_server.close()
        await until(lambda: "link DOWN" in app.status_text, "link down after the kill")
        await type_line(pilot, "are you there")
        await until(lambda: "queued 1" in app.status_text, "the line counted as queued")
        assert "home is unreachable: queued" in app.conversation_text()

        async with LocalNatsServer(port=nats_server.port):
            await until(lambda: "link up" in app.status_text, "link up after the restart")
            assert "queued 0" in app.status_text
            # Core NATS delivers the buffered line only to subscribers already back; the
            # bridge's outbox is what makes it exactly-once. Here: a fresh line gets through.
            await until(lambda: agent.nc.is_connected, "the played agent reconnecting")
            await agent.nc.flush()
            await type_line(pilot, "now")
            turn = await agent.next_turn()
            while turn.payload["text"] != "now":
                turn = await agent.next_turn()
            assert turn.binding_id is not None
            await agent.speak(turn.binding_id, "I am back.")
            _, ack = await agent.next_ack()
            assert ack.binding_id == turn.binding_id
            await until(lambda: "I am back." in app.conversation_text(), "the answer")


async def test_raw_view_toggles_and_shows_events_both_ways(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        assert not app.raw_shown
        await pilot.press("ctrl+r")
        assert app.raw_shown
        await type_line(pilot, "hi")
        turn = await agent.next_turn()
        assert turn.binding_id is not None
        await agent.speak(turn.binding_id, "Hello.")
        await agent.next_ack()
        await until(lambda: app.raw_lines >= 3, "turn, speak and ack in the raw view")
        await pilot.press("f2")
        assert not app.raw_shown


async def test_a_malformed_event_is_counted_and_the_tui_carries_on(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        await agent.nc.publish("events.workspace.edge_asr.out.speak.tui", b'{"not": "an event"}')
        await until(lambda: app.session.malformed == 1, "the malformed event to be counted")
        await type_line(pilot, "still there")
        turn = await agent.next_turn()
        assert turn.binding_id is not None
        await agent.speak(turn.binding_id, "Yes.")
        _, ack = await agent.next_ack()
        assert ack.binding_id == turn.binding_id


async def test_ctrl_c_quits(nats_server: LocalNatsServer) -> None:
    async with running_tui(nats_server.url) as (app, pilot):
        await pilot.press("ctrl+c")
        await until(lambda: not app.is_running, "the app to exit")
    assert app.return_code == 0
    assert not app.session.connected


async def test_an_unreachable_nats_ends_the_app_with_exit_1() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    app = TetherTui(EdgeSession(url, DEVICE), transport="direct")
    async with app.run_test() as _pilot:
        await until(lambda: not app.is_running, "the app to give up")
    assert app.return_code == 1


def test_raw_lines_put_the_telling_keys_first() -> None:
    event = Event.new(
        "speak", {"text": "Hi."}, source="agent.x", sequence_number=0, binding_id="b1"
    )
    line = raw_body(event.to_json())
    assert line.startswith('{"event_type":"speak","binding_id":"b1","payload":{"text":"Hi."}')
    assert json.loads(line) == event.to_dict()
    assert raw_body(b"\xffnot json") == "\ufffdnot json"


async def test_f3_shows_the_devices_earlier_conversation_with_the_active_agent(
    nats_server: LocalNatsServer, agent: PlayedAgent
) -> None:
    asked: list[HistoryRequest] = []

    async def answer_history(msg: Msg) -> None:
        asked.append(HistoryRequest.from_json(msg.data))
        earlier = HistoryTurn("2026-12-01T09:00:00Z", "b1", "my name is Ada", ("speak: Hi Ada.",))
        await msg.respond(HistoryReply("edge_asr", DEVICE, "s-1", (earlier,)).to_json())

    async with running_tui(nats_server.url) as (app, pilot):
        await pilot.press("f3")
        await until(lambda: not asked and "no agent has answered" in str(app.notices), "")
        await type_line(pilot, "hello")
        turn = await agent.next_turn()
        assert turn.binding_id is not None
        await agent.speak(turn.binding_id, "Hello.")
        await agent.next_ack()
        sub = await app.session.client.subscribe(history_subject("edge_asr"), cb=answer_history)
        await pilot.press("f3")
        await until(lambda: "my name is Ada" in screen_text(app), "the history")
        shown = screen_text(app)
        await sub.unsubscribe()
        await pilot.press("f3")  # nobody answers now: a notice, not a crash
        await until(lambda: "no history from edge_asr" in str(app.notices), "the notice")

    assert asked == [HistoryRequest(DEVICE)]
    assert shown.index("my name is Ada") < shown.index("you hello")
    assert "edge_asr speak: Hi Ada." in shown


def screen_text(app: TetherTui) -> str:
    """Every block of the conversation view, in screen order, as plain text."""
    return "\n".join(str(w.render()) for w in app.query(".turn"))


async def test_a_line_the_bridge_half_refuses_shows_as_not_sent(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    """Through the bridge the TUI asks the edge half to take each turn and ack; here the
    half (real, with limits no envelope fits) refuses both, and the screen says so."""
    half = make_pair(tmp_path / "pair").edge
    nc = await nats.connect(nats_server.url)
    core = BridgeCore(replace(half, limits=replace(half.limits, max_event_bytes=64)), nc)
    await core.start()
    board = PlayedAgent(nc, device=half.device)
    await board.start()
    app = TetherTui(EdgeSession(nats_server.url, half.device, asks_bridge=True), transport="bridge")
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(lambda: app.session.connected, "the connection")
            await type_line(pilot, "is the kettle on")
            turn = await board.next_turn()
            await until(lambda: "not sent" in app.conversation_text(), "the refusal shown")
            assert turn.binding_id is not None
            await board.speak(turn.binding_id, "It is.")
            await board.next_ack()
            await until(lambda: "home was not told" in str(app.notices), "the ack's refusal")
    finally:
        await core.close()
        await nc.close()
    shown = app.conversation_text()
    assert "you is the kettle on" in shown
    assert "not sent: the bridge refused the event" in shown and "(refused)" in shown
    assert app.session.acks_not_taken == 1 and app.session.acked == 0
    assert sum(core.counters.refused.values()) == 2
