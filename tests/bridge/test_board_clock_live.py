"""A board's clock 3 h off, through real SSH and one real nats-server per side.

The board's wall clock is injected (``WallClock``); nothing sleeps to make time
pass: home's later moments are handed to the router's pure decision instead.
The same decisions, exhaustively and without I/O, are ``test_clocks.py``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from bridge.node import WallClock
from home.substrate.routing import EXPIRED, Delivered, Dropped, Route, route_binding
from shared.event import Event
from shared.subjects import sensation_turn_subject, speak_subject, workspace_in_subject
from tests.bridge.servers import Collector, Paired, Rig, running_bridge, wait_until

HOURS_3 = 3 * 3600.0
TTL_MS = 60_000
TURN = sensation_turn_subject("board")
SPEAK = speak_subject("main", "board")
ROUTE = Route("edge_asr_memory", TURN, "agent.main", workspace_in_subject("main"))
BOARD_OFF = pytest.mark.parametrize("board_offset", [HOURS_3, -HOURS_3], ids=["ahead", "behind"])
HOME_CLOCK = WallClock(now=time.time, synced=lambda: True)


def _board_clock(offset_s: float, synced: bool) -> WallClock:
    return WallClock(now=lambda: time.time() + offset_s, synced=lambda: synced)


def _turn(board: WallClock) -> Event:
    """A turn as the board's ASR makes it: stamped by the board's clock."""
    return Event.new(
        "sensation.turn",
        {"text": "what time is it"},
        source="edge.asr",
        sequence_number=1,
        ttl_ms=TTL_MS,
        now=datetime.fromtimestamp(board.now(), UTC),
    )


def _routed_at(event: Event, at: datetime) -> Delivered | Dropped:
    return route_binding(event, ROUTE, "router", at)


async def _listening(rig: Rig) -> tuple[Collector, Collector]:
    at_home, at_board = Collector(), Collector()
    await rig.home_nc.subscribe(TURN, cb=at_home.cb)
    await rig.edge_nc.subscribe(SPEAK, cb=at_board.cb)
    await rig.home_nc.flush()
    await rig.edge_nc.flush()
    await wait_until(lambda: rig.edge.health()["ok"], what="link up")
    return at_home, at_board


@BOARD_OFF
async def test_an_unsynced_boards_turns_are_judged_on_homes_clock_from_intake(
    paired: Paired, home_nats: str, edge_nats: str, board_offset: float
) -> None:
    board = _board_clock(board_offset, synced=False)
    async with running_bridge(
        paired, home_nats, edge_nats, home_clock=HOME_CLOCK, edge_clock=board
    ) as rig:
        at_home, at_board = await _listening(rig)
        measured = rig.home.health()["devices"]["board"]["peer_clock"]
        assert measured["synced"] is False and measured["expiry"] == "judged here from intake"
        assert measured["offset_ms"] == pytest.approx(board_offset * 1000, abs=5_000)

        await rig.edge_nc.publish(TURN, _turn(board).to_json())
        await wait_until(lambda: at_home.msgs, what="the turn at home")
        taken_in = datetime.now(UTC)
        arrived = at_home.events()[0]
        assert abs(arrived.timestamp - taken_in) < timedelta(seconds=5)  # home's clock now
        assert isinstance(_routed_at(arrived, taken_in), Delivered)
        # The same turn held at home longer than its TTL is dropped as expired.
        late = _routed_at(arrived, taken_in + timedelta(milliseconds=TTL_MS + 5_000))
        assert isinstance(late, Dropped) and late.reason == EXPIRED

        # And home's speech is heard on the board, whose clock reads it 3 h off.
        speak = Event.new("speak", {"text": "noon"}, source="handset", sequence_number=1)
        await rig.home_nc.publish(SPEAK, speak.to_json())
        await wait_until(lambda: at_board.msgs, what="the speech on the board")
        assert rig.edge.health()["counters"]["expired"] == 0
        assert rig.home.health()["devices"]["board"]["counters"]["expired"] == 0


async def test_a_synced_board_ahead_is_judged_as_stamped(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    board = _board_clock(HOURS_3, synced=True)
    async with running_bridge(
        paired, home_nats, edge_nats, home_clock=HOME_CLOCK, edge_clock=board
    ) as rig:
        at_home, _ = await _listening(rig)
        sent = _turn(board)
        await rig.edge_nc.publish(TURN, sent.to_json())
        await wait_until(lambda: at_home.msgs, what="the turn at home")
        arrived = at_home.events()[0]
        assert arrived.timestamp == sent.timestamp
        later = datetime.now(UTC) + timedelta(milliseconds=TTL_MS + 5_000)
        assert isinstance(_routed_at(arrived, later), Delivered)
        assert rig.home.health()["devices"]["board"]["peer_clock"]["expiry"] == "as stamped"


async def test_a_synced_board_behind_has_its_turns_dropped_as_expired_on_arrival(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    board = _board_clock(-HOURS_3, synced=True)
    async with running_bridge(
        paired, home_nats, edge_nats, home_clock=HOME_CLOCK, edge_clock=board
    ) as rig:
        at_home, _ = await _listening(rig)
        await rig.edge_nc.publish(TURN, _turn(board).to_json())
        home_counters = rig.home.cores["board"].counters
        await wait_until(lambda: home_counters.expired == 1, what="the turn expired at home")
        await rig.home_nc.flush()
        assert at_home.msgs == [] and home_counters.delivered == 0
