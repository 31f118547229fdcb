"""The pure bridge session: sequence gaps, duplicates, expiry, refusals, acks, resume."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import FrameError, HelloRefused
from bridge.node.session import (
    BATCH_RECORDS,
    Action,
    BridgeSession,
    DropExpired,
    ExpireOutbox,
    PublishLocal,
    RefuseEvent,
    RefuseHello,
    SendFrame,
    Transmit,
)
from bridge.protocol import (
    Ack,
    EventRecord,
    Events,
    Frame,
    HelloFrame,
    Ping,
    Pong,
    Refuse,
)
from shared.event import Event
from shared.schema import BridgeHalf, SubjectDecl, load_bridge_half

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOW = T0.timestamp()
TTL_S = 60.0
TURN = "events.sensation.board.turn"


@pytest.fixture
def edge_half() -> BridgeHalf:
    return load_bridge_half("schemas/bridge/board.edge.yaml")


@pytest.fixture
def home_half() -> BridgeHalf:
    return load_bridge_half("schemas/bridge/board.home.yaml")


def _event(text: str = "hi", *, ttl_s: float = TTL_S, hops: tuple[str, ...] = ()) -> Event:
    return Event.new(
        "sensation.turn",
        {"text": text},
        source="t",
        sequence_number=1,
        ttl_ms=int(ttl_s * 1000),
        hops=hops,
        now=T0,
    )


def _hello(session: BridgeSession) -> HelloFrame:
    return HelloFrame(session.hello().to_body())


def _link(edge: BridgeSession, home: BridgeSession) -> None:
    """Both hellos are written before either is read, as on a real link."""
    edge_hello, home_hello = _hello(edge), _hello(home)
    assert edge.greet(home_hello, None) == []
    assert home.greet(edge_hello, "board") == []


def _deliver(session: BridgeSession, actions: list[Action]) -> tuple[list[Event], list[Action]]:
    """Carry out ``actions`` as the shell does when every publish succeeds."""
    published: list[Event] = []
    others: list[Action] = []
    todo = list(actions)
    while todo:
        action = todo.pop(0)
        if isinstance(action, PublishLocal):
            published.append(Event.from_json(action.data))
            todo.extend(session.published(action))
        else:
            others.append(action)
    return published, others


def _records(*pairs: tuple[int, Event], subject: str = TURN) -> Events:
    return Events(tuple(EventRecord(seq, subject, event.to_json()) for seq, event in pairs))


@pytest.fixture
def home(edge_half: BridgeHalf, home_half: BridgeHalf) -> BridgeSession:
    """Home's session on a link with the edge."""
    session = BridgeSession(home_half)
    _link(BridgeSession(edge_half), session)
    return session


# --- sending ---------------------------------------------------------------------


def test_an_event_sent_without_a_link_waits_in_the_outbox(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge = BridgeSession(edge_half)
    assert edge.send(TURN, _event().to_json(), NOW) == []
    assert len(edge.outbox) == 1 and edge.counters.accepted == 1
    assert edge.next_batch(NOW) is None
    _link(edge, BridgeSession(home_half))
    batch = edge.next_batch(NOW)
    assert batch is not None and [r.seq for r in batch.records] == [1]
    assert Event.from_json(batch.records[0].data).hops == ("bridge:board@edge",)
    assert edge.counters.sent == 1 and edge.counters.resent == 0


def test_an_event_sent_on_a_link_wakes_the_writer(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge = BridgeSession(edge_half)
    _link(edge, BridgeSession(home_half))
    assert edge.send(TURN, _event().to_json(), NOW) == [Transmit()]
    assert edge.queued
    assert edge.next_batch(NOW) is not None
    assert not edge.queued


@pytest.mark.parametrize(
    ("subject", "data", "reason"),
    [
        ("events.sensation.board.partial", _event().to_json(), "not_declared"),
        ("events.sensation.kitchen.turn", _event().to_json(), "foreign_device"),
        (TURN, b"\xff\xfe", "not_text"),
        (TURN, b"{not json", "malformed"),
        (TURN, _event(hops=("bridge:board@edge",)).to_json(), "loop"),
    ],
)
def test_an_outgoing_refusal_is_counted_and_named(
    edge_half: BridgeHalf, subject: str, data: bytes, reason: str
) -> None:
    edge = BridgeSession(edge_half)
    [action] = edge.send(subject, data, NOW)
    assert isinstance(action, RefuseEvent)
    assert (action.reason, action.where) == (reason, "an outgoing event")
    assert action.message.startswith(f"{reason}: ")
    assert edge.counters.refused == {reason: 1}
    assert len(edge.outbox) == 0 and edge.counters.accepted == 0


def test_an_expired_outgoing_event_is_dropped(edge_half: BridgeHalf) -> None:
    edge = BridgeSession(edge_half)
    event = _event(ttl_s=1)
    assert edge.send(TURN, event.to_json(), NOW + 2) == [DropExpired(event.event_id, f"on {TURN}")]
    assert edge.counters.expired == 1 and len(edge.outbox) == 0


def test_a_full_outbox_refuses_the_event(edge_half: BridgeHalf) -> None:
    small = dataclasses.replace(
        edge_half, limits=dataclasses.replace(edge_half.limits, outbox_events=2)
    )
    edge = BridgeSession(small)
    for _ in range(2):
        assert edge.send(TURN, _event().to_json(), NOW) == []
    event = _event()
    [action] = edge.send(TURN, event.to_json(), NOW)
    assert (
        action == RefuseEvent("outbox_full", f"{event.event_id} on {TURN}", action.message)
        and "2 unacked" in action.message
    )
    assert edge.counters.refused == {"outbox_full": 1} and edge.counters.accepted == 2


def test_batches_are_bounded_and_skip_what_expired_unsent(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge = BridgeSession(edge_half)
    _link(edge, BridgeSession(home_half))
    edge.send(TURN, _event(ttl_s=1).to_json(), NOW)
    for _ in range(BATCH_RECORDS + 5):
        edge.send(TURN, _event().to_json(), NOW)
    first = edge.next_batch(NOW + 2)
    assert first is not None and len(first.records) == BATCH_RECORDS
    assert first.records[0].seq == 2  # seq 1 expired before it went out
    assert edge.counters.expired == 1 and edge.queued
    rest = edge.next_batch(NOW + 2)
    assert rest is not None and len(rest.records) == 5 and not edge.queued
    assert edge.counters.sent == BATCH_RECORDS + 5


# --- receiving -------------------------------------------------------------------


def test_records_are_published_one_at_a_time_and_acked_once_published(
    home: BridgeSession,
) -> None:
    a, b = _event("a"), _event("b")
    [first] = home.receive(_records((1, a), (2, b)), NOW, 0)
    assert isinstance(first, PublishLocal) and (first.seq, first.event_id) == (1, a.event_id)
    assert first.subject == TURN
    assert Event.from_json(first.data).hops == ("bridge:board@home",)
    assert home.ack_point == 0 and home.counters.delivered == 0  # not yet published
    [second] = home.published(first)
    assert isinstance(second, PublishLocal) and second.event_id == b.event_id
    assert home.ack_point == 1 and home.counters.delivered == 1
    assert home.published(second) == []
    assert home.ack_point == 2
    assert home.counters.received == home.counters.delivered == 2


def test_a_publish_never_reported_leaves_the_record_unhandled(home: BridgeSession) -> None:
    a, b = _event("a"), _event("b")
    home.receive(_records((1, a), (2, b)), NOW, 0)  # the publish of seq 1 fails
    assert home.ack_point == 0 and home.counters.delivered == 0
    # The resend on the next link is delivered, not counted as a duplicate.
    published, others = _deliver(home, home.receive(_records((1, a), (2, b)), NOW, 0))
    assert [e.event_id for e in published] == [a.event_id, b.event_id] and others == []
    assert home.counters.duplicates == 0 and home.counters.delivered == 2
    assert home.counters.received == 3  # seq 1 arrived twice; seq 2 was never decided


def test_sequence_gaps_are_accepted_and_older_sequences_are_duplicates(
    home: BridgeSession,
) -> None:
    published, _ = _deliver(home, home.receive(_records((1, _event()), (3, _event())), NOW, 0))
    assert len(published) == 2 and home.ack_point == 3
    published, _ = _deliver(home, home.receive(_records((7, _event())), NOW, 0))
    assert len(published) == 1 and home.ack_point == 7
    late = _records((2, _event()), (5, _event()), (7, _event()))
    assert home.receive(late, NOW, 0) == []
    assert home.counters.duplicates == 3 and home.ack_point == 7


def test_a_sequence_twice_in_one_frame_is_a_duplicate(home: BridgeSession) -> None:
    event = _event()
    published, _ = _deliver(home, home.receive(_records((1, event), (1, event)), NOW, 0))
    assert len(published) == 1 and home.counters.duplicates == 1


def test_the_same_event_under_a_new_sequence_is_a_duplicate_until_it_expires(
    home: BridgeSession,
) -> None:
    event = _event(ttl_s=10)
    published, _ = _deliver(home, home.receive(_records((1, event), (2, event)), NOW, 0))
    assert len(published) == 1 and home.counters.duplicates == 1
    # Resent later under yet another sequence, still within its lifetime.
    assert home.receive(_records((9, event)), NOW + 9, 0) == []
    assert home.counters.duplicates == 2 and home.ack_point == 9  # handled, so acked
    # Past its lifetime the id is forgotten, and the event is dropped as expired instead.
    assert home.receive(_records((10, event)), NOW + 11, 0) == [
        DropExpired(event.event_id, "on arrival")
    ]
    assert home.counters.expired == 1 and home.counters.duplicates == 2


def test_an_event_expired_on_arrival_is_dropped_and_acked(home: BridgeSession) -> None:
    stale, fresh = _event(ttl_s=1), _event(ttl_s=100)
    published, others = _deliver(home, home.receive(_records((1, stale), (2, fresh)), NOW + 5, 0))
    assert [e.event_id for e in published] == [fresh.event_id]
    assert others == [DropExpired(stale.event_id, "on arrival")]
    assert home.counters.expired == 1 and home.ack_point == 2


@pytest.mark.parametrize(
    ("subject", "event", "reason"),
    [
        ("events.sensation.board.partial", _event(), "not_declared"),
        ("events.action.speech.completed.x.y", _event(), "not_declared"),
        ("events.sensation.kitchen.turn", _event(), "foreign_device"),
        (TURN, _event(hops=("bridge:board@home",)), "loop"),
        ("events..turn", _event(), "malformed"),
    ],
)
def test_an_incoming_refusal_is_counted_named_and_acked(
    home: BridgeSession, subject: str, event: Event, reason: str
) -> None:
    [action] = home.receive(_records((4, event), subject=subject), NOW, 0)
    assert isinstance(action, RefuseEvent)
    assert (action.reason, action.where) == (reason, "an incoming event (seq 4)")
    assert home.counters.refused == {reason: 1} and home.counters.delivered == 0
    assert home.ack_point == 4  # handled: a resend would be refused again


def test_a_refusal_in_a_frame_does_not_stop_the_records_after_it(home: BridgeSession) -> None:
    good = _event()
    frame = Events(
        (
            EventRecord(1, TURN, b"\xff"),
            EventRecord(2, TURN, good.to_json()),
        )
    )
    published, others = _deliver(home, home.receive(frame, NOW, 0))
    assert [e.event_id for e in published] == [good.event_id]
    assert [a.reason for a in others if isinstance(a, RefuseEvent)] == ["not_text"]


def test_control_frames(home: BridgeSession) -> None:
    assert home.receive(Ping(5), NOW, 0) == [SendFrame(Pong(5))]
    assert home.receive(Pong(1_000_000), NOW, 3_000_000) == []
    assert home.counters.rtt_ms == 2.0
    with pytest.raises(HelloRefused, match="the peer closed the link: bye") as info:
        home.receive(Refuse("bye", ("one",)), NOW, 0)
    assert info.value.findings == ("one",)
    with pytest.raises(FrameError, match="a second HELLO"):
        home.receive(HelloFrame({}), NOW, 0)


def test_an_ack_clears_the_outbox_cumulatively(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge = BridgeSession(edge_half)
    _link(edge, BridgeSession(home_half))
    for _ in range(3):
        edge.send(TURN, _event().to_json(), NOW)
    edge.next_batch(NOW)
    assert edge.receive(Ack(2), NOW, 0) == []
    assert [e.seq for e in edge.outbox.pending()] == [3]


# --- hello and resume --------------------------------------------------------------


def test_a_hello_that_does_not_pair_is_refused(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    wider = dataclasses.replace(
        edge_half, imports=(*edge_half.imports, SubjectDecl("events.workspace.main.out.x", 1))
    )
    home = BridgeSession(home_half)
    [action] = home.greet(_hello(BridgeSession(wider)), "board")
    assert isinstance(action, RefuseHello) and "does not pair" in action.reason
    assert action.findings and not home.linked and home.counters.link_ups == 0


def test_a_hello_from_another_device_is_refused(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    [action] = BridgeSession(home_half).greet(_hello(BridgeSession(edge_half)), "kitchen")
    assert isinstance(action, RefuseHello)
    assert any("belongs to device 'kitchen'" in f for f in action.findings)


def test_a_malformed_hello_is_refused_without_findings(home_half: BridgeHalf) -> None:
    [action] = BridgeSession(home_half).greet(HelloFrame({"protocol": "ssh"}), "board")
    assert isinstance(action, RefuseHello) and "'protocol'" in action.reason
    assert action.findings == ()


def test_a_first_frame_that_is_no_hello_ends_the_link(home_half: BridgeHalf) -> None:
    session = BridgeSession(home_half)
    with pytest.raises(FrameError, match="expected HELLO first, got Ping"):
        session.greet(Ping(1), "board")
    with pytest.raises(HelloRefused, match="the peer refused this half: no"):
        session.greet(Refuse("no"), "board")


def test_a_new_link_resends_only_what_the_peer_did_not_handle(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge, home = BridgeSession(edge_half), BridgeSession(home_half)
    _link(edge, home)
    for text in "abc":
        edge.send(TURN, _event(text).to_json(), NOW)
    batch = edge.next_batch(NOW)
    assert batch is not None
    partial = Events(batch.records[:2])  # the link dies after two records reached home
    published, _ = _deliver(home, home.receive(partial, NOW, 0))
    assert len(published) == 2
    edge.detach()
    home.detach()
    assert edge.counters.link_downs == home.counters.link_downs == 1
    _link(edge, home)
    again = edge.next_batch(NOW)
    assert again is not None and [r.seq for r in again.records] == [3]
    assert edge.counters.resent == 1 and edge.counters.link_ups == 2
    published, _ = _deliver(home, home.receive(again, NOW, 0))
    assert [e.payload["text"] for e in published] == ["c"]


def test_a_restarted_peer_gets_everything_again_and_dedupe_catches_it(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge, home = BridgeSession(edge_half), BridgeSession(home_half)
    _link(edge, home)
    edge.send(TURN, _event().to_json(), NOW)
    batch = edge.next_batch(NOW)
    assert batch is not None
    assert len(_deliver(home, home.receive(batch, NOW, 0))[0]) == 1
    # Edge restarts (a new stream) and the same record comes again, under seq 1.
    home.detach()
    _link(BridgeSession(edge_half), home)
    assert home.ack_point == 0
    assert home.receive(batch, NOW, 0) == []
    assert home.counters.duplicates == 1 and home.ack_point == 1


def test_expiry_of_sent_events_is_counted_once_the_peer_says_it_missed_them(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge, home = BridgeSession(edge_half), BridgeSession(home_half)
    _link(edge, home)
    edge.send(TURN, _event(ttl_s=1).to_json(), NOW)  # sent, lost on the way
    edge.send(TURN, _event(ttl_s=1).to_json(), NOW)
    edge.next_batch(NOW)
    edge.detach()
    edge.send(TURN, _event(ttl_s=1).to_json(), NOW)  # never sent
    assert edge.tick(NOW + 5) == [ExpireOutbox(1, "unacked event(s) expired in the outbox")]
    assert edge.counters.expired == 1
    home.detach()
    edge_hello, home_hello = _hello(edge), _hello(home)
    assert edge.greet(home_hello, None) == [ExpireOutbox(2, "sent event(s) expired unacked")]
    assert home.greet(edge_hello, "board") == []
    assert edge.counters.expired == 3 and len(edge.outbox) == 0
    assert edge.tick(NOW + 6) == []


# --- any interleaving ---------------------------------------------------------------

# One step of a lossy link between an edge and a home session: the edge's local
# NATS publishes an event, a frame crosses, the link drops (frames in flight are
# lost), or home's next publish fails (which ends the link).
_STEPS = st.lists(
    st.sampled_from(["send", "edge_to_home", "home_to_edge", "drop", "fail_publish"]),
    max_size=60,
)


class _Wire:
    """Two sessions and the frames in flight between them."""

    def __init__(self, edge_half: BridgeHalf, home_half: BridgeHalf) -> None:
        self.edge, self.home = BridgeSession(edge_half), BridgeSession(home_half)
        self.to_home: list[Frame] = []
        self.to_edge: list[Frame] = []
        self.delivered: list[str] = []
        self.fail_next = False
        _link(self.edge, self.home)

    def edge_to_home(self) -> None:
        batch = self.edge.next_batch(NOW)
        if batch is not None:
            self.to_home.append(batch)
        if not self.to_home:
            return
        todo = self.home.receive(self.to_home.pop(0), NOW, 0)
        while todo:
            action = todo.pop(0)
            if isinstance(action, PublishLocal):
                if self.fail_next:
                    self.fail_next = False
                    self.drop()
                    return
                self.delivered.append(action.event_id)
                todo.extend(self.home.published(action))
        self.to_edge.append(Ack(self.home.ack_point))

    def home_to_edge(self) -> None:
        if self.to_edge:
            assert self.edge.receive(self.to_edge.pop(0), NOW, 0) == []

    def drop(self) -> None:
        self.to_home.clear()
        self.to_edge.clear()
        self.edge.detach()
        self.home.detach()
        _link(self.edge, self.home)


@settings(max_examples=200, deadline=None)
@given(_STEPS)
def test_every_accepted_event_is_delivered_exactly_once_in_order(steps: list[str]) -> None:
    wire = _Wire(
        load_bridge_half("schemas/bridge/board.edge.yaml"),
        load_bridge_half("schemas/bridge/board.home.yaml"),
    )
    sent: list[str] = []
    for step in steps:
        if step == "send":
            event = _event(f"t{len(sent)}")
            wire.edge.send(TURN, event.to_json(), NOW)
            sent.append(event.event_id)
        elif step == "fail_publish":
            wire.fail_next = True
        else:
            getattr(wire, step)()
        assert len(wire.delivered) == len(set(wire.delivered))  # never twice
    wire.fail_next = False
    wire.drop()
    while wire.edge.queued or wire.to_home or wire.to_edge:
        wire.edge_to_home()
        wire.home_to_edge()
    assert wire.delivered == sent
    assert len(wire.edge.outbox) == 0
    assert wire.home.counters.delivered == len(sent)
    assert wire.edge.counters.accepted == len(sent)
