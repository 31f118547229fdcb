"""The durable outbox: the store's file round trip, and the durable session's store actions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bridge.node.outbox import OutboxStore, StoreError
from bridge.node.session import BridgeSession, ForgetAcked, StoreEvent, Transmit
from bridge.protocol import Ack, HelloFrame, OutboxEntry
from shared.event import Event
from shared.schema import BridgeHalf, load_bridge_half

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOW = T0.timestamp()
TURN = "events.sensation.board.turn"


@pytest.fixture
def edge_half() -> BridgeHalf:
    return load_bridge_half("schemas/bridge/board.edge.yaml")


@pytest.fixture
def home_half() -> BridgeHalf:
    return load_bridge_half("schemas/bridge/board.home.yaml")


def _event(text: str, ttl_s: float = 60.0) -> Event:
    return Event.new(
        "sensation.turn",
        {"text": text},
        source="t",
        sequence_number=1,
        ttl_ms=int(ttl_s * 1000),
        now=T0,
    )


def _entry(seq: int, event_id: str, expires_at: float = NOW + 60) -> OutboxEntry:
    return OutboxEntry(seq, TURN, b"{}", event_id, expires_at)


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
def test_what_a_run_commits_is_what_the_next_run_restores(tmp_path: Path, synchronous: str) -> None:
    path = tmp_path / "side.sqlite"
    store = OutboxStore(path, "FULL" if synchronous == "FULL" else "NORMAL")
    for seq, event_id in ((1, "a"), (2, "b"), (3, "c")):
        store.add(_entry(seq, event_id))
    store.add(_entry(4, "old", expires_at=NOW - 1))
    store.ack(1)
    store.commit_inbound("peer-stream", 7, [("x", NOW + 60), ("gone", NOW - 1)], NOW)
    store.close()  # as good as a kill: every write above was its own commit

    restored = OutboxStore(path).restore(NOW)
    assert [e.event_id for e in restored.pending] == ["b", "c"]
    assert restored.seen == {"x": NOW + 60}
    assert restored.inbound is not None
    assert (restored.inbound.stream, restored.inbound.seq) == ("peer-stream", 7)


def test_renumbering_replaces_the_outbox_and_expire_forgets(tmp_path: Path) -> None:
    store = OutboxStore(tmp_path / "side.sqlite")
    store.add(_entry(10, "a"))
    store.add(_entry(11, "b", expires_at=NOW - 1))
    store.renumber([_entry(1, "a")])
    store.expire(NOW)
    assert [(e.seq, e.event_id) for e in store.restore(NOW - 10).pending] == [(1, "a")]


def test_a_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the folder should be")
    with pytest.raises(StoreError, match="taken"):
        OutboxStore(tmp_path / "taken" / "side.sqlite")


def test_a_durable_session_asks_to_store_each_event_and_forget_each_ack(
    edge_half: BridgeHalf, home_half: BridgeHalf
) -> None:
    edge = BridgeSession(edge_half, durable=True)
    home = BridgeSession(home_half, "board")
    first = edge.send(TURN, _event("while down").to_json(), NOW)
    assert len(first) == 1 and isinstance(first[0], StoreEvent)
    assert edge.greet(HelloFrame(home.hello().to_body()), None) == []
    home.greet(HelloFrame(edge.hello().to_body()), "board")
    second = edge.send(TURN, _event("while up").to_json(), NOW)
    assert [type(a) for a in second] == [StoreEvent, Transmit]
    assert edge.receive(Ack(2), NOW, 0) == [ForgetAcked(2)]
    assert len(edge.outbox) == 0


def test_a_restored_session_resends_under_a_new_stream_and_remembers_what_it_delivered(
    edge_half: BridgeHalf,
) -> None:
    before = BridgeSession(edge_half, durable=True)
    stored = [
        a.entry for a in before.send(TURN, _event("x").to_json(), NOW) if isinstance(a, StoreEvent)
    ]
    after = BridgeSession(edge_half, durable=True)
    entries = after.restore(stored, {"delivered": NOW + 60}, ("home-stream", 5))
    assert after.outbox.stream != before.outbox.stream
    assert [e.event_id for e in entries] == [stored[0].event_id] and entries[0].seq == 1
    assert after.dedupe.seen("delivered", NOW)
    assert (after.inbound.stream, after.inbound.seq) == ("home-stream", 5)
    assert after.hello().received.seq == 5
