"""What the home endpoint and each half refuse, each with a clear error, counted and logged."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import nats
import pytest

from bridge.errors import TransportRefused
from bridge.node import EdgeBridgeNode, HomeBridgeEndpoint
from bridge.pair import pair
from bridge.protocol import (
    Ack,
    EventRecord,
    Events,
    FrameDecoder,
    FrameEncoder,
    Hello,
    HelloFrame,
    Refuse,
    Resume,
)
from bridge.transport import BRIDGE_SUBSYSTEM, Backoff, open_bridge_channel
from bridge.transport.server import MAX_UNAUTHENTICATED_PER_PEER
from shared.event import Event
from shared.messages.bridge import BridgeStatus
from shared.proc import free_port
from shared.schema import BridgeHalf, SubjectDecl, load_bridge_half
from tests.bridge.servers import (
    Collector,
    Paired,
    make_pair,
    running_bridge,
    wait_until,
    with_port,
)
from tests.bridge.test_link import turn


@pytest.fixture
async def home(paired: Paired, home_nats: str) -> AsyncIterator[HomeBridgeEndpoint]:
    """The home endpoint alone, on a free port."""
    endpoint = HomeBridgeEndpoint(
        [paired.home], host_key=paired.result.host_key, nats_url=home_nats, port=0
    )
    await endpoint.start()
    try:
        yield endpoint
    finally:
        await endpoint.close()


async def _connect(paired: Paired, port: int, **kwargs: object) -> asyncssh.SSHClientConnection:
    options: dict[str, object] = {
        "username": "tether",
        "client_keys": [str(paired.result.client_key)],
        "known_hosts": None,
        "agent_path": None,
        "config": None,
    }
    options.update(kwargs)
    return await asyncio.wait_for(asyncssh.connect("127.0.0.1", port, **options), 10)


# --- SSH layer -----------------------------------------------------------------


async def test_wrong_client_key_is_refused(
    paired: Paired, home: HomeBridgeEndpoint, tmp_path: Path
) -> None:
    other = pair("board", "127.0.0.1:2222", tmp_path / "other")  # same name, different key
    edge = with_port(paired.edge, home.port)
    with pytest.raises(TransportRefused, match="refused our key"):
        async with open_bridge_channel(edge.endpoint, other.client_key):
            pass


async def test_unknown_host_key_is_refused(
    paired: Paired, home: HomeBridgeEndpoint, tmp_path: Path
) -> None:
    other = load_bridge_half(pair("board", "127.0.0.1:2222", tmp_path / "other").edge_half)
    pinned_elsewhere = with_port(
        dataclasses.replace(
            paired.edge,
            endpoint=dataclasses.replace(paired.edge.endpoint, host_key=other.endpoint.host_key),
        ),
        home.port,
    )
    with pytest.raises(TransportRefused, match="not the pinned"):
        async with open_bridge_channel(pinned_elsewhere.endpoint, paired.result.client_key):
            pass


async def test_unpinned_host_key_is_never_opened(paired: Paired) -> None:
    unpinned = dataclasses.replace(
        paired.edge, endpoint=dataclasses.replace(paired.edge.endpoint, host_key=None)
    )
    with pytest.raises(TransportRefused, match="pins no host key"):
        async with open_bridge_channel(unpinned.endpoint, paired.result.client_key):
            pass


async def test_password_is_refused(paired: Paired, home: HomeBridgeEndpoint) -> None:
    with pytest.raises(asyncssh.PermissionDenied):
        await _connect(
            paired, home.port, client_keys=None, password="hunter2", preferred_auth="password"
        )
    with pytest.raises(asyncssh.PermissionDenied):
        await _connect(
            paired,
            home.port,
            client_keys=None,
            password="hunter2",
            preferred_auth="keyboard-interactive",
        )


async def test_exec_and_shell_are_refused(
    paired: Paired, home: HomeBridgeEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tether.bridge.ssh")
    async with await _connect(paired, home.port) as conn:
        with pytest.raises(asyncssh.ChannelOpenError):
            await conn.run("cat /etc/passwd", check=False)
        with pytest.raises(asyncssh.ChannelOpenError):
            await conn.create_process()  # a shell
        with pytest.raises(asyncssh.ChannelOpenError):
            await conn.create_process(subsystem="sftp")
    assert "refused exec 'cat /etc/passwd'" in caplog.text
    assert "refused a shell" in caplog.text


async def test_forwards_are_refused(
    paired: Paired,
    home: HomeBridgeEndpoint,
    home_nats: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="tether.bridge.ssh")
    nats_port = int(home_nats.rsplit(":", 1)[1])
    async with await _connect(paired, home.port) as conn:
        with pytest.raises(asyncssh.ChannelOpenError):
            await conn.open_connection("127.0.0.1", nats_port)
        with pytest.raises(asyncssh.ChannelListenError):
            await conn.forward_remote_port("127.0.0.1", 0, "127.0.0.1", 22)
    assert f"refused a forward to 127.0.0.1:{nats_port}" in caplog.text


async def test_unauthenticated_connections_are_capped_per_address(
    paired: Paired, home: HomeBridgeEndpoint
) -> None:
    """Before: 200 connections held open unauthenticated were all kept (and a real board
    then waited behind their key exchanges)."""
    held = [
        await asyncio.open_connection("127.0.0.1", home.port)
        for _ in range(MAX_UNAUTHENTICATED_PER_PEER + 4)
    ]
    try:
        await wait_until(lambda: home.logins.refused == 4, what="the 4 past the cap refused")
        assert home.health()["unauthenticated"] == MAX_UNAUTHENTICATED_PER_PEER
        # A board from another address is let in all the same, and its login is released.
        async with await _connect(paired, home.port, local_addr=("127.0.0.2", 0)):
            pass
    finally:
        for _, writer in held:
            writer.close()
    await wait_until(lambda: home.health()["unauthenticated"] == 0, what="held ones released")
    assert home.health()["refused_connections"] == 4


# --- hello ---------------------------------------------------------------------


def _narrowed(half: BridgeHalf) -> BridgeHalf:
    """An edge half that also exports a subject home does not import."""
    extra = (*half.exports, SubjectDecl("events.workspace.main.out.journal_append", 1))
    return dataclasses.replace(half, exports=extra)


async def test_half_that_fails_check_is_refused_at_hello(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    async with running_bridge(
        paired, home_nats, edge_nats, edge_half=_narrowed(paired.edge)
    ) as rig:
        await wait_until(lambda: rig.edge.health()["state"] == "refused", what="refusal")
        detail = rig.edge.health()["detail"]
        assert "B010" in detail or "does not pair" in detail
        assert rig.home.health()["devices"]["board"]["state"] == "refused"
        assert "journal_append" in rig.home.health()["devices"]["board"]["detail"]
        assert rig.edge.health()["counters"]["link_ups"] == 0


class RawEdge:
    """A hand-driven edge: speaks frames directly, to send what a correct edge never would."""

    def __init__(self, reader: asyncssh.SSHReader[bytes], writer: asyncssh.SSHWriter[bytes]):
        self.reader, self.writer = reader, writer
        self.enc, self.dec = FrameEncoder(), FrameDecoder()
        self.pending: list[object] = []

    async def hello(self, half: BridgeHalf) -> object:
        hello = Hello.for_half(half, "raw-stream", Resume(None, 0))
        self.writer.write(self.enc.encode(HelloFrame(hello.to_body())))
        return await self.next_frame()

    async def next_frame(self) -> object:
        async with asyncio.timeout(10):
            while not self.pending:
                data = await self.reader.read(65536)
                if not data:
                    raise EOFError("home closed the channel")
                self.pending.extend(self.dec.feed(data))
        return self.pending.pop(0)

    async def send(self, records: list[tuple[str, bytes]], first_seq: int = 1) -> Ack:
        recs = tuple(EventRecord(first_seq + i, s, d) for i, (s, d) in enumerate(records))
        self.writer.write(self.enc.encode(Events(recs)))
        while True:
            frame = await self.next_frame()
            if isinstance(frame, Ack) and frame.seq >= recs[-1].seq:
                return frame


async def test_hello_naming_another_device_is_refused(
    paired: Paired, home: HomeBridgeEndpoint
) -> None:
    async with await _connect(paired, home.port) as conn:
        writer, reader, _ = await conn.open_session(subsystem=BRIDGE_SUBSYSTEM, encoding=None)
        raw = RawEdge(reader, writer)
        other = dataclasses.replace(paired.edge, device="kitchen")
        assert isinstance(await raw.hello(other), HelloFrame)  # home's own hello comes first
        answer = await raw.next_frame()
        assert isinstance(answer, Refuse)
        assert any("belongs to device 'board'" in f for f in answer.findings)


async def test_a_hello_with_many_findings_is_refused_in_one_log_line(
    paired: Paired, home: HomeBridgeEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    unimported = tuple(SubjectDecl(f"events.sensation.board.t{i}", i) for i in range(60))
    wide = dataclasses.replace(paired.edge, exports=(*paired.edge.exports, *unimported))
    caplog.set_level(logging.INFO, logger="tether.bridge")
    async with await _connect(paired, home.port) as conn:
        writer, reader, _ = await conn.open_session(subsystem=BRIDGE_SUBSYSTEM, encoding=None)
        raw = RawEdge(reader, writer)
        assert isinstance(await raw.hello(wide), HelloFrame)
        answer = await raw.next_frame()
        assert isinstance(answer, Refuse)
        assert len(answer.findings) == 11
        await wait_until(
            lambda: any("link for device" in r.getMessage() for r in caplog.records),
            what="the link's end logged",
        )
    refusals = [r.getMessage() for r in caplog.records if "board" in r.getMessage()]
    assert refusals
    assert all("\n" not in message for message in refusals)
    assert sum("t17" in message for message in refusals) == 0  # findings past the first


async def test_a_hello_with_a_malformed_subject_is_refused_and_counted(
    paired: Paired, home: HomeBridgeEndpoint
) -> None:
    """Before: SubjectError escaped the handshake, and the link dropped uncounted and unlogged."""
    broken = dataclasses.replace(paired.edge, exports=(SubjectDecl("events..turn", 1),))
    async with await _connect(paired, home.port) as conn:
        writer, reader, _ = await conn.open_session(subsystem=BRIDGE_SUBSYSTEM, encoding=None)
        raw = RawEdge(reader, writer)
        assert isinstance(await raw.hello(broken), HelloFrame)
        answer = await raw.next_frame()
        assert isinstance(answer, Refuse)
        assert "empty token" in answer.reason
    counters = home.cores["board"].counters
    await wait_until(lambda: counters.link_ends["hello_refused"] == 1, what="the refusal counted")


async def test_whatever_ends_a_link_is_counted_and_logged_once(
    home: HomeBridgeEndpoint, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug of ours\nwith a second line")

    core = home.cores["board"]
    monkeypatch.setattr(core, "run_link", broken)
    caplog.set_level(logging.WARNING, logger="tether.bridge.home")
    await home._on_link("board", None, None)  # type: ignore[arg-type]
    assert core.counters.snapshot()["link_ends"] == {"internal_error": 1}
    [line] = [r.getMessage() for r in caplog.records]
    assert line == "link for device 'board' ended (internal_error): a bug of ours"


# --- payloads, refused at both halves ---------------------------------------------


def _event(payload: dict[str, object]) -> bytes:
    return Event.new("sensation.turn", payload, source="edge.asr", sequence_number=1).to_json()


BAD_PAYLOADS = {
    "audio": {"text": "hi", "audio": [0, 1, 2]},
    "base64 blob": {"text": "A" * 4000},
    "oversize": {"text": " ".join(["word"] * 1000), "more": [" ".join(["word"] * 1000)] * 20},
}


async def test_non_text_and_oversize_refused_by_sending_edge(
    paired: Paired, home_nats: str, edge_nats: str
) -> None:
    async with running_bridge(paired, home_nats, edge_nats) as rig:
        seen = Collector()
        await rig.home_nc.subscribe("events.sensation.>", cb=seen.cb)
        await rig.home_nc.flush()
        await wait_until(lambda: rig.edge.health()["ok"], what="link up")
        for payload in BAD_PAYLOADS.values():
            await rig.edge_nc.publish("events.sensation.board.turn", _event(payload))
        await rig.edge_nc.publish("events.sensation.board.turn", b"\x00\x01 not json")
        await rig.edge_nc.publish("events.sensation.board.turn", turn(9))
        await wait_until(lambda: seen.msgs, what="the good event")
        refused = rig.edge.health()["counters"]["refused"]
        assert refused == {"not_text": 2, "oversize": 1, "malformed": 1}
        assert [e.payload["text"] for e in seen.events()] == ["what's the weather"]
        assert rig.edge.health()["counters"]["sent"] == 1


async def test_crafted_frames_refused_by_receiving_home(
    paired: Paired, home: HomeBridgeEndpoint, home_nats: str
) -> None:
    nc = await nats.connect(home_nats)
    seen = Collector()
    await nc.subscribe("events.sensation.>", cb=seen.cb)
    await nc.flush()
    try:
        async with await _connect(paired, home.port) as conn:
            writer, reader, _ = await conn.open_session(subsystem=BRIDGE_SUBSYSTEM, encoding=None)
            raw = RawEdge(reader, writer)
            assert isinstance(await raw.hello(paired.edge), HelloFrame)
            records = [("events.sensation.board.turn", _event(p)) for p in BAD_PAYLOADS.values()]
            records += [
                ("events.sensation.kitchen.turn", turn(2)),  # another device's rail
                ("events.workspace.main.out.journal_append", turn(3)),  # not imported
                ("events.sensation.board.turn", b"\xff\xfe binary"),
                ("events.sensation.board.turn", turn(4)),
            ]
            looped = Event.from_json(turn(5)).with_hop("bridge:board@home").to_json()
            records.append(("events.sensation.board.turn", looped))
            ack = await raw.send(records)
            assert ack.seq == len(records)
            await wait_until(lambda: seen.msgs, what="the one good event")
            counters = home.health()["devices"]["board"]["counters"]
            assert counters["refused"] == {
                "not_text": 3,
                "oversize": 1,
                "foreign_device": 1,
                "not_declared": 1,
                "loop": 1,
            }
            assert counters["delivered"] == 1
            # A resend of what was already acked is dropped as a duplicate.
            await raw.send([("events.sensation.board.turn", turn(4))], first_seq=len(records))
            assert home.health()["devices"]["board"]["counters"]["duplicates"] == 1
        await asyncio.sleep(0.1)
        assert seen.subjects() == ["events.sensation.board.turn"]
    finally:
        await nc.close()


async def test_edge_reports_home_unreachable_on_status(
    paired: Paired, edge_nats: str, home_nats: str
) -> None:
    nc = await nats.connect(edge_nats)
    status = Collector()
    await nc.subscribe("events.bridge.board.status", cb=status.cb)
    await nc.flush()
    node = EdgeBridgeNode(
        with_port(paired.edge, free_port()),  # nobody listens there
        client_key=paired.result.client_key,
        nats_url=edge_nats,
        backoff=Backoff(base_s=0.05, cap_s=0.2),
        status_interval_s=0.1,
    )
    await node.start()
    try:
        await nc.publish("events.sensation.board.turn", turn(1))
        await wait_until(lambda: len(status.msgs) >= 2, what="status events")
        event = status.events()[0]
        assert event.event_type == "bridge.status"
        parsed = BridgeStatus.from_event(event)  # the shape the edge reads
        assert parsed.bridge == "board"
        assert parsed.reachable is False
        assert parsed.reason
        assert event.payload["text"].startswith("Cannot reach home")
        await wait_until(lambda: node.health()["outbox"] == 1, what="the turn waiting")
        assert node.health()["ok"] is False
    finally:
        await node.close()
        await nc.close()


async def test_full_outbox_and_expired_events_are_counted(paired: Paired, edge_nats: str) -> None:
    small = dataclasses.replace(
        paired.edge, limits=dataclasses.replace(paired.edge.limits, outbox_events=2)
    )
    nc = await nats.connect(edge_nats)
    node = EdgeBridgeNode(
        with_port(small, free_port()),  # home unreachable: everything waits in the outbox
        client_key=paired.result.client_key,
        nats_url=edge_nats,
        backoff=Backoff(base_s=0.05, cap_s=0.2),
    )
    await node.start()
    try:
        short = Event.new(
            "sensation.turn", {"text": "soon stale"}, source="t", sequence_number=1, ttl_ms=200
        )
        await nc.publish("events.sensation.board.turn", short.to_json())
        await nc.publish("events.sensation.board.turn", turn(2))
        await nc.publish("events.sensation.board.turn", turn(3))
        await wait_until(
            lambda: node.health()["counters"]["refused"].get("outbox_full") == 1,
            what="the third event refused",
        )
        await wait_until(lambda: node.health()["counters"]["expired"] == 1, what="expiry")
        assert node.health()["outbox"] == 1
    finally:
        await node.close()
        await nc.close()


async def test_every_half_is_listened_on(paired: Paired, home_nats: str, tmp_path: Path) -> None:
    """Before: only the first half's address was bound, and a device paired with another
    --listen could never connect while the endpoint still said ok."""
    kitchen = make_pair(tmp_path / "kitchen", "kitchen")
    first, second = free_port(), free_port()
    halves = [with_port(paired.home, first), with_port(kitchen.home, second)]
    endpoint = HomeBridgeEndpoint(halves, host_key=paired.result.host_key, nats_url=home_nats)
    await endpoint.start()
    try:
        assert endpoint.health()["listen"] == f"127.0.0.1:{first}, 127.0.0.1:{second}"
        assert endpoint.health()["ok"]
        for port in (first, second):
            edge = with_port(paired.edge, port)
            async with open_bridge_channel(edge.endpoint, paired.result.client_key):
                pass
    finally:
        await endpoint.close()


async def test_a_device_added_later_on_another_address_is_listened_on(
    paired: Paired, home_nats: str, tmp_path: Path
) -> None:
    kitchen = make_pair(tmp_path / "kitchen", "kitchen")
    first, second = free_port(), free_port()
    endpoint = HomeBridgeEndpoint(
        [with_port(paired.home, first)], host_key=paired.result.host_key, nats_url=home_nats
    )
    await endpoint.start()
    try:
        await endpoint.add(with_port(kitchen.home, second))
        assert endpoint.health()["listen"] == f"127.0.0.1:{first}, 127.0.0.1:{second}"
        edge = with_port(paired.edge, second)
        async with open_bridge_channel(edge.endpoint, paired.result.client_key):
            pass
    finally:
        await endpoint.close()
