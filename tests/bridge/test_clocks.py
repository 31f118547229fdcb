"""A board's clock hours off: the hello says whether it is synced, home judges expiry itself.

Pure: the session is given both sides' clocks (docs/architecture.md "Bridge",
bridge/PROTOCOL.md "Clocks"). The same through real NATS and SSH is
``test_board_clock_live.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import ClockSettingError, FrameError
from bridge.node.clock import CLOCK_SYNCED_ENV, WallClock, kernel_clock_synced, synced_probe
from bridge.node.session import Action, BridgeSession, DropExpired, PublishLocal, RefuseHello
from bridge.protocol import ClockReading, Hello, HelloFrame, Resume
from home.substrate.routing import EXPIRED, Delivered, Dropped, Route, route_binding
from shared.event import Event
from shared.schema import load_bridge_half
from shared.subjects import sensation_turn_subject, speak_subject, workspace_in_subject
from tests.support import json_strategy

EDGE = load_bridge_half("schemas/bridge/board.edge.yaml")
HOME = load_bridge_half("schemas/bridge/board.home.yaml")
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOW = T0.timestamp()  # home's clock, which is right
TTL_S = 60.0
HOURS_3 = 3 * 3600.0
TURN = sensation_turn_subject("board")
SPEAK = speak_subject("main", "board")
ROUTE = Route("edge_asr_memory", TURN, "agent.main", workspace_in_subject("main"))
BOARD_OFF = pytest.mark.parametrize("board_offset", [HOURS_3, -HOURS_3], ids=["ahead", "behind"])


def _turn(stamped: float, ttl_s: float = TTL_S) -> Event:
    """A turn the board stamps at ``stamped`` on its own clock."""
    return Event.new(
        "sensation.turn",
        {"text": "what time is it"},
        source="edge.asr",
        sequence_number=1,
        ttl_ms=int(ttl_s * 1000),
        now=datetime.fromtimestamp(stamped, UTC),
    )


def _linked(
    board: ClockReading, home_clock: ClockReading | None = None
) -> tuple[BridgeSession, BridgeSession]:
    """An edge and a home session on one link, each hello carrying its side's clock."""
    home_clock = home_clock or ClockReading(NOW, True)
    edge, home = BridgeSession(EDGE), BridgeSession(HOME, "board")
    edge_hello = HelloFrame(edge.hello(board).to_body())
    home_hello = HelloFrame(home.hello(home_clock).to_body())
    assert edge.greet(home_hello, None, board) == []
    assert home.greet(edge_hello, "board", home_clock) == []
    return edge, home


def _cross(
    sender: BridgeSession, event: Event, subject: str, sent_at: float, receiver: BridgeSession
) -> list[Action]:
    """``event`` sent at ``sent_at`` (the sender's clock), taken in by ``receiver`` at NOW."""
    sender.send(subject, event.to_json(), sent_at)
    batch = sender.next_batch(sent_at)
    assert batch is not None, "the sender dropped the event before it went out"
    return receiver.receive(batch, NOW, 0)


def _published(receiver: BridgeSession, actions: list[Action]) -> Event:
    """The one event ``actions`` publish, reported published as the shell would."""
    assert len(actions) == 1 and isinstance(actions[0], PublishLocal), actions
    assert receiver.published(actions[0]) == []
    return Event.from_json(actions[0].data)


def _routed_at(event: Event, at: float) -> Delivered | Dropped:
    return route_binding(event, ROUTE, "router", datetime.fromtimestamp(at, UTC))


# --- an unsynced board ---------------------------------------------------------------


@BOARD_OFF
def test_an_unsynced_boards_fresh_turn_is_delivered_and_expires_by_homes_clock(
    board_offset: float,
) -> None:
    board_now = NOW + board_offset
    edge, home = _linked(ClockReading(board_now, False))
    actions = _cross(edge, _turn(board_now), TURN, board_now, home)

    turn = _published(home, actions)
    assert turn.timestamp == T0  # restamped: made at intake, on home's clock
    assert isinstance(actions[0], PublishLocal) and actions[0].expires_at == NOW + TTL_S
    assert isinstance(_routed_at(turn, NOW + 1), Delivered)
    # Held up at home past its TTL (a busy agent, a redelivery): dropped as expired.
    late = _routed_at(turn, NOW + TTL_S + 1)
    assert isinstance(late, Dropped) and late.reason == EXPIRED
    assert home.counters.delivered == 1 and home.counters.expired == 0


@BOARD_OFF
def test_time_a_turn_waited_on_the_board_counts_through_the_measured_offset(
    board_offset: float,
) -> None:
    board_now = NOW + board_offset
    edge, home = _linked(ClockReading(board_now, False))
    waited = _published(home, _cross(edge, _turn(board_now - 50), TURN, board_now, home))
    assert waited.expires_at == T0 + timedelta(seconds=10)
    assert isinstance(_routed_at(waited, NOW + 9), Delivered)
    assert isinstance(_routed_at(waited, NOW + 11), Dropped)


@BOARD_OFF
def test_a_board_clock_that_stepped_since_the_hello_gets_the_whole_ttl_from_intake(
    board_offset: float,
) -> None:
    # The hello said 3 h off; NTP has since set the board right: its stamps are true now,
    # and read through the stale offset they are 3 h old or 3 h in the future.
    edge, home = _linked(ClockReading(NOW + board_offset, False))
    turn = _published(home, _cross(edge, _turn(NOW), TURN, NOW, home))
    assert turn.timestamp == T0 and turn.expires_at == T0 + timedelta(seconds=TTL_S)


def test_an_unsynced_home_judges_a_synced_boards_turns_on_its_own_clock() -> None:
    board_now = NOW - HOURS_3  # home's clock is the one 3 h off, and says it is not synced
    edge, home = _linked(ClockReading(board_now, True), ClockReading(NOW, False))
    turn = _published(home, _cross(edge, _turn(board_now), TURN, board_now, home))
    assert turn.timestamp == T0


def test_an_unsynced_board_judges_homes_speech_on_its_own_clock() -> None:
    board_now = NOW + HOURS_3
    edge, home = _linked(ClockReading(board_now, False))
    speak = Event.new(
        "speak", {"text": "noon"}, source="handset", sequence_number=1, ttl_ms=30_000, now=T0
    )
    home.send(SPEAK, speak.to_json(), NOW)
    batch = home.next_batch(NOW)
    assert batch is not None
    actions = edge.receive(batch, board_now, 0)
    heard = _published(edge, actions)  # not dropped as 3 h stale on the board's clock
    assert heard.timestamp == datetime.fromtimestamp(board_now, UTC)
    assert edge.counters.expired == 0


# --- a synced board: as before ------------------------------------------------------------


def test_a_synced_board_ahead_is_judged_as_stamped() -> None:
    board_now = NOW + HOURS_3
    edge, home = _linked(ClockReading(board_now, True))
    sent = _turn(board_now)
    turn = _published(home, _cross(edge, sent, TURN, board_now, home))
    assert turn.timestamp == sent.timestamp
    assert isinstance(_routed_at(turn, NOW + TTL_S + 1), Delivered)


def test_a_synced_board_behind_is_dropped_as_expired_on_arrival() -> None:
    board_now = NOW - HOURS_3
    edge, home = _linked(ClockReading(board_now, True))
    sent = _turn(board_now)
    actions = _cross(edge, sent, TURN, board_now, home)
    assert actions == [DropExpired(sent.event_id, "on arrival")]
    assert home.counters.expired == 1 and home.counters.delivered == 0


def test_a_hello_without_a_clock_is_judged_as_stamped() -> None:
    # A board from before the hello's clock key: nothing measured, nothing rewritten.
    board_now = NOW - HOURS_3
    edge, home = BridgeSession(EDGE), BridgeSession(HOME, "board")
    assert edge.greet(HelloFrame(home.hello(ClockReading(NOW, True)).to_body()), None) == []
    assert home.greet(HelloFrame(edge.hello().to_body()), "board", ClockReading(NOW, True)) == []
    assert home.peer_clock is None
    sent = _turn(board_now)
    assert _cross(edge, sent, TURN, board_now, home) == [DropExpired(sent.event_id, "on arrival")]


@settings(max_examples=200, deadline=None)
@given(
    offset=st.floats(-7 * 86400, 7 * 86400),
    waited=st.floats(0, TTL_S - 0.01),  # the timestamp keeps microseconds, no finer
    board_synced=st.booleans(),
)
def test_an_unsynced_link_never_gives_a_turn_more_than_its_ttl_from_when_it_was_made(
    offset: float, waited: float, board_synced: bool
) -> None:
    board_now = NOW + offset
    edge, home = _linked(ClockReading(board_now, board_synced), ClockReading(NOW, False))
    actions = _cross(edge, _turn(board_now - waited), TURN, board_now, home)
    assert isinstance(actions[0], PublishLocal)
    assert actions[0].expires_at == pytest.approx(NOW - waited + TTL_S, abs=1e-3)


# --- the hello's clock ------------------------------------------------------------------


def test_the_hello_carries_the_clock_and_measures_the_offset() -> None:
    hello = Hello.for_half(EDGE, "s", Resume(None, 0), ClockReading(NOW + HOURS_3, False))
    body = hello.to_body()
    assert body["clock"] == {"synced": False, "now": NOW + HOURS_3}
    assert Hello.from_body(body) == hello
    _, home = _linked(ClockReading(NOW + HOURS_3, False))
    assert home.peer_clock is not None
    assert home.peer_clock.describe() == {
        "synced": False,
        "offset_ms": 3 * 3600 * 1000,
        "expiry": "judged here from intake",
    }


@pytest.mark.parametrize(
    ("clock", "named"),
    [
        ("noon", "'clock' must be an object"),
        ({"now": NOW}, "'clock.synced' must be true or false"),
        ({"synced": "yes", "now": NOW}, "'clock.synced'"),
        ({"synced": False}, "'clock.now' must be epoch seconds"),
        ({"synced": False, "now": "12:00"}, "'clock.now'"),
        ({"synced": False, "now": True}, "'clock.now'"),
        ({"synced": False, "now": 1e300}, "'clock.now'"),
    ],
)
def test_a_malformed_clock_refuses_the_hello_by_name(clock: object, named: str) -> None:
    body = Hello.for_half(EDGE, "s", Resume(None, 0)).to_body() | {"clock": clock}
    with pytest.raises(FrameError, match=named):
        Hello.from_body(body)
    home = BridgeSession(HOME, "board")
    [refusal] = home.greet(HelloFrame(body), "board", ClockReading(NOW, True))
    assert isinstance(refusal, RefuseHello) and named in refusal.reason


@settings(max_examples=200, deadline=None)
@given(json_strategy.json_values(max_leaves=20, text_size=20, width=4))
def test_any_clock_value_is_taken_or_refused_by_name(clock: object) -> None:
    body = Hello.for_half(EDGE, "s", Resume(None, 0)).to_body() | {"clock": clock}
    home = BridgeSession(HOME, "board")
    actions = home.greet(HelloFrame(body), "board", ClockReading(NOW, True))
    if home.linked:
        assert actions == [] and home.peer_clock is not None
    else:
        [refusal] = actions
        assert isinstance(refusal, RefuseHello) and "'clock" in refusal.reason


# --- this side's clock --------------------------------------------------------------------


def test_the_synced_override_and_the_kernel_probe() -> None:
    assert synced_probe({CLOCK_SYNCED_ENV: "yes"})() is True
    assert synced_probe({CLOCK_SYNCED_ENV: "No"})() is False
    assert synced_probe({}) is kernel_clock_synced
    assert isinstance(kernel_clock_synced(), bool)  # whatever this machine's clock is
    with pytest.raises(ClockSettingError, match=f"{CLOCK_SYNCED_ENV} must be 'yes' or 'no'"):
        synced_probe({CLOCK_SYNCED_ENV: "maybe"})
    reading = WallClock(now=lambda: NOW, synced=lambda: True).read()
    assert reading == ClockReading(NOW, True)
