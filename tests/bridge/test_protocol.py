"""The pure frame protocol: frames, hello, outbox/receive/dedupe state, half policy, backoff."""

from __future__ import annotations

import dataclasses
import random
import struct
from typing import Any

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import FrameError, HelloRefused, OutboxFull, Refused
from bridge.protocol import (
    Ack,
    Deduper,
    EventRecord,
    Events,
    FrameDecoder,
    FrameEncoder,
    HalfPolicy,
    Hello,
    HelloFrame,
    Outbox,
    Ping,
    Pong,
    ReceiveState,
    Refuse,
    Resume,
    check_hello,
)
from bridge.protocol.frames import MAX_FRAME_BYTES
from bridge.transport import Backoff
from shared.event import Event
from shared.schema import BridgeHalf, SubjectDecl, load_bridge_half

BOARD_EDGE = "schemas/bridge/board.edge.yaml"
BOARD_HOME = "schemas/bridge/board.home.yaml"


@pytest.fixture
def edge() -> BridgeHalf:
    return load_bridge_half(BOARD_EDGE)


@pytest.fixture
def home() -> BridgeHalf:
    return load_bridge_half(BOARD_HOME)


def _turn(text: str = "hello there", **kw: object) -> bytes:
    return Event.new(
        "sensation.turn", {"text": text}, source="t", sequence_number=1, **kw
    ).to_json()  # type: ignore[arg-type]


# --- frames --------------------------------------------------------------------


ALL_FRAMES = [
    HelloFrame({"protocol": "tether-bridge", "x": [1, 2]}),
    Refuse("no", ("a", "b")),
    Events((EventRecord(1, "a.b", b'{"k":1}'), EventRecord(2, "a.c", b"{}"))),
    Ack(7),
    Ping(123456789),
    Pong(42),
]


def test_every_frame_round_trips() -> None:
    enc, dec = FrameEncoder(), FrameDecoder()
    wire = b"".join(enc.encode(f) for f in ALL_FRAMES)
    assert dec.feed(wire) == ALL_FRAMES
    assert enc.wire_bytes == dec.wire_bytes == len(wire)


def test_frames_survive_any_split() -> None:
    enc, dec = FrameEncoder(), FrameDecoder()
    wire = b"".join(enc.encode(f) for f in ALL_FRAMES)
    out = []
    for i in range(len(wire)):
        out.extend(dec.feed(wire[i : i + 1]))
    assert out == ALL_FRAMES


@given(st.lists(st.tuples(st.text(min_size=1, max_size=30), st.binary(max_size=300)), max_size=20))
def test_event_batches_round_trip(records: list[tuple[str, bytes]]) -> None:
    enc, dec = FrameEncoder(), FrameDecoder()
    frame = Events(tuple(EventRecord(i + 1, s, d) for i, (s, d) in enumerate(records)))
    assert dec.feed(enc.encode(frame)) == [frame]


def test_one_compression_context_per_connection() -> None:
    enc = FrameEncoder()
    batch = Events((EventRecord(1, "events.sensation.board.turn", _turn("what time is it")),))
    first = enc.encode(batch)
    second = enc.encode(batch)
    assert len(second) < len(first) / 2  # the second batch refers back into the shared window
    with pytest.raises(FrameError, match="does not decompress"):
        FrameDecoder().feed(second)  # meaningless without the connection's earlier frames


def test_decoder_refuses_bad_frames() -> None:
    with pytest.raises(FrameError, match="outside"):
        FrameDecoder().feed(struct.pack(">IB", 100_000_000, 3))
    with pytest.raises(FrameError, match="unknown frame type 0x7f"):
        FrameDecoder().feed(struct.pack(">IB", 1, 0x7F))
    with pytest.raises(FrameError, match="must be 8 bytes"):
        FrameDecoder().feed(struct.pack(">IB", 3, 4) + b"xx")
    with pytest.raises(FrameError, match="not UTF-8 JSON"):
        FrameDecoder().feed(struct.pack(">IB", 4, 1) + b"{{{")


class _CountingDecompressor:
    """Wraps a zstd decompressobj and counts every byte it hands out."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.total = 0

    def decompress(self, data: bytes) -> bytes:
        out: bytes = self.inner.decompress(data)
        self.total += len(out)
        return out


def test_a_decompression_bomb_is_refused_without_expanding_it() -> None:
    """64 MiB in one record, compressed to a few kilobytes; before, all of it was expanded."""
    size = 64 * 1024 * 1024
    zc = zstandard.ZstdCompressor().compressobj()
    parts = [zc.compress(struct.pack(">QH", 1, 1) + b"a" + struct.pack(">I", size))]
    parts += [zc.compress(bytes(1024 * 1024)) for _ in range(64)]
    body = b"".join(parts) + zc.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    assert len(body) < 8192
    dec = FrameDecoder()
    probe = _CountingDecompressor(dec._zstd)
    dec._zstd = probe
    with pytest.raises(FrameError, match="decompresses to more than 8388608 bytes"):
        dec.feed(struct.pack(">IB", len(body) + 1, 3) + body)
    # Expansion stops within a few zstd blocks (128 KiB each) past the frame limit.
    assert probe.total <= MAX_FRAME_BYTES + 512 * 1024


def test_a_large_legitimate_batch_still_decodes() -> None:
    records = tuple(
        EventRecord(i + 1, "events.sensation.board.turn", _turn(f"turn {i} " + "x" * 3000))
        for i in range(600)
    )
    enc, dec = FrameEncoder(), FrameDecoder()
    assert dec.feed(enc.encode(Events(records))) == [Events(records)]


# --- hello -----------------------------------------------------------------------


def test_hello_round_trips_and_pairs(edge: BridgeHalf, home: BridgeHalf) -> None:
    hello = Hello.for_half(edge, "s1", Resume("s0", 5))
    back = Hello.from_body(hello.to_body())
    assert back == hello
    peer = check_hello(home, back, authenticated_device="board")
    assert peer.digest() == edge.digest()


def test_hello_refuses_a_mismatched_half_naming_the_difference(
    edge: BridgeHalf, home: BridgeHalf
) -> None:
    wider = dataclasses.replace(
        edge, exports=(*edge.exports, SubjectDecl("events.workspace.main.out.delegate", 1))
    )
    with pytest.raises(HelloRefused) as info:
        check_hello(home, Hello.for_half(wider, "s", Resume(None, 0)), "board")
    assert any("B010" in f and "delegate" in f for f in info.value.findings)


def test_hello_refuses_tampered_digest_version_and_device(
    edge: BridgeHalf, home: BridgeHalf
) -> None:
    hello = Hello.for_half(edge, "s", Resume(None, 0))
    with pytest.raises(HelloRefused, match="digest"):
        check_hello(home, dataclasses.replace(hello, digest="0" * 64), "board")
    with pytest.raises(HelloRefused, match="version 2 is not supported"):
        check_hello(home, dataclasses.replace(hello, version=2), "board")
    with pytest.raises(HelloRefused) as info:
        check_hello(home, hello, "kitchen")
    assert any("belongs to device 'kitchen'" in f for f in info.value.findings)
    with pytest.raises(FrameError, match="'protocol'"):
        Hello.from_body({"protocol": "ssh"})
    with pytest.raises(FrameError, match="'exports'"):
        Hello.from_body(hello.to_body() | {"exports": "events.>"})


def test_hello_lists_are_bounded_before_any_comparison(edge: BridgeHalf) -> None:
    body = Hello.for_half(edge, "s", Resume(None, 0)).to_body()
    flood = [f"events.sensation.board.t{i}" for i in range(3000)]
    with pytest.raises(FrameError, match="'exports' lists 3000 subjects, over the limit of 64"):
        Hello.from_body(body | {"exports": flood})
    with pytest.raises(FrameError, match=r"imports\[0\] is 5000 characters"):
        Hello.from_body(body | {"imports": ["a" * 5000]})


def test_hello_with_a_malformed_subject_is_a_frame_error(edge: BridgeHalf) -> None:
    body = Hello.for_half(edge, "s", Resume(None, 0)).to_body()
    with pytest.raises(FrameError, match=r"exports\[1\].*empty token"):
        Hello.from_body(body | {"exports": ["events.sensation.board.turn", "events..turn"]})


def test_a_refusal_names_a_bounded_number_of_findings(edge: BridgeHalf, home: BridgeHalf) -> None:
    unimported = tuple(SubjectDecl(f"events.sensation.board.t{i}", i) for i in range(60))
    wide = dataclasses.replace(edge, exports=(*edge.exports, *unimported))
    with pytest.raises(HelloRefused) as info:
        check_hello(home, Hello.for_half(wide, "s", Resume(None, 0)), "board")
    assert "60 finding(s)" in info.value.message
    assert len(info.value.findings) == 11
    assert info.value.findings[-1] == "… and 50 more finding(s)"


# --- session state ---------------------------------------------------------------


def test_outbox_acks_cumulatively_and_is_bounded() -> None:
    box = Outbox(3)
    for i in range(3):
        box.add("s", b"{}", f"e{i}", 100.0)
    with pytest.raises(OutboxFull):
        box.add("s", b"{}", "e3", 100.0)
    assert box.ack(2) == 2
    assert [e.seq for e in box.pending()] == [3]
    assert box.add("s", b"{}", "e4", 100.0).seq == 4


def test_outbox_expiry_counts_sent_entries_only_after_the_peer_says() -> None:
    box = Outbox(10)
    entries = [box.add("s", b"{}", f"e{i}", 10.0 + i) for i in range(4)]  # seq 1..4
    box.mark_sent(entries[0])
    box.mark_sent(entries[1])
    # seq 1, 2 were sent; 3 was not: only 3 is certainly undelivered.
    assert [e.seq for e in box.drop_expired(now=12.5)] == [3]
    # The peer's hello says it handled seq 1: seq 2 never arrived and is ours to count.
    assert [e.seq for e in box.restart(1)] == [2]
    assert [e.seq for e in box.pending()] == [4]
    assert box.mark_sent(entries[3]) is False
    assert box.restart(None) == []
    assert box.mark_sent(entries[3]) is True  # a resend


def test_receive_state_and_dedupe() -> None:
    rx = ReceiveState()
    assert rx.attach("a") is True
    assert rx.accept(1) and rx.accept(3)
    assert not rx.accept(2)
    assert rx.attach("a") is False and rx.seq == 3
    assert rx.attach("b") is True and rx.seq == 0
    dd = Deduper(capacity=3)
    assert dd.first_time("x", 10.0, now=1.0)
    assert not dd.first_time("x", 10.0, now=2.0)
    assert dd.first_time("x", 20.0, now=11.0)  # forgotten once expired
    dd.forget("x")
    assert dd.first_time("x", 20.0, now=12.0)  # a failed delivery is forgotten at once
    for i in range(5):
        dd.first_time(f"y{i}", 50.0, now=12.0)
    assert len(dd) <= 3


# --- policy ----------------------------------------------------------------------


def test_policy_passes_declared_text_and_appends_its_hop(edge: BridgeHalf) -> None:
    event = HalfPolicy(edge).outgoing("events.sensation.board.turn", _turn())
    assert event.hops == ("bridge:board@edge",)


@pytest.mark.parametrize(
    ("subject", "data", "reason"),
    [
        ("events.sensation.board.partial", _turn(), "not_declared"),
        ("events.sensation.kitchen.turn", _turn(), "foreign_device"),
        ("events.sensation.board.turn", b"\xff\xfe", "not_text"),
        ("events.sensation.board.turn", b"{not json", "malformed"),
        ("events.sensation.board.*", _turn(), "malformed"),
        ("events.sensation.board.turn", _turn("x" * 9000), "not_text"),
        ("events.sensation.board.turn", _turn("hi", hops=("bridge:board@edge",)), "loop"),
    ],
)
def test_policy_refusals(edge: BridgeHalf, subject: str, data: bytes, reason: str) -> None:
    with pytest.raises(Refused) as info:
        HalfPolicy(edge).outgoing(subject, data)
    assert info.value.reason == reason


def test_policy_limits_are_the_halfs_own(edge: BridgeHalf) -> None:
    small = dataclasses.replace(edge, limits=dataclasses.replace(edge.limits, max_event_bytes=200))
    with pytest.raises(Refused) as info:
        HalfPolicy(small).outgoing("events.sensation.board.turn", _turn("a fairly long sentence"))
    assert info.value.reason == "oversize"


def test_backoff_is_capped_and_jittered() -> None:
    backoff = Backoff(base_s=0.5, cap_s=4.0, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(50)]
    assert all(0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) == len(delays)
    assert max(delays[10:]) > 0.5  # the ceiling grew past the base
    backoff.reset()
    assert backoff.next_delay() <= 0.5
