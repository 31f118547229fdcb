"""Never silently deaf: bridge down -> the local notice for a turn; bridge back -> normal turns;
a turn the bridge half does not take -> the notice too."""

from __future__ import annotations

import wave
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS

from bridge.node import BridgeCore
from bridge.node.outbox import OutboxStore, store_path
from edge.audio import WavSink
from edge.config import BridgeConfig
from edge.runtime import EdgeRuntime, Models
from shared.event import Event, new_binding_id
from shared.messages.bridge import BridgeStatus
from shared.messages.voice import Reply, Turn
from shared.subjects import edge_notice_subject, reply_subject, speak_subject
from tests.bridge.servers import Paired, make_pair
from tests.edge.conftest import Collector, connect, file_config, wait_for
from tests.support.small_fs import small_filesystem

pytestmark = pytest.mark.slow

ACKS = "events.action.speech.completed.*"
NOTICES = edge_notice_subject("board")


def status(reachable: bool) -> tuple[str, Event]:
    s = BridgeStatus("board", reachable=reachable, reason=None if reachable else "link down")
    return s.subject, s.to_event(source="bridge.board", sequence_number=0)


def turn_event(text: str) -> tuple[str, Event]:
    now = datetime.now(UTC)
    turn = Turn("board", new_binding_id(), text, 1.0, (), now, now, "push_to_talk")
    return turn.subject, turn.to_event(source="edge.audio.board", sequence_number=0)


async def test_a_spoken_turn_while_home_is_unreachable_gets_the_notice(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.wav"
    sink = WavSink(out, realtime=False)
    # Real time, so the bridge's status is in before the phrase ends.
    config = file_config(annyeong_wav, out, realtime=True, answer_timeout_s=20)
    async with EdgeRuntime(config, models=models, sink=sink) as edge:
        client = await connect(edge.nats.url)
        try:
            bus = await Collector(client).watch(ACKS, NOTICES)
            await bus.publish(*status(reachable=False))
            await wait_for(lambda: not edge.notice.home_reachable, "the status to land")
            assert await edge.drain() == []  # the notice settles the turn
            # The notice event may reach this client after the turn settled on the board.
            await wait_for(lambda: bus.on(NOTICES), "the notice event")
        finally:
            await client.close()
        assert len(edge.asr.turn_published) == 1
        assert edge.notice.notices_played == 1
        assert edge.speaker.stats.notices == 1
        notice_samples = edge.notice.samples
        turn_binding_id = edge.asr.turn_published[0].binding_id
    assert bus.on(ACKS) == []  # a local notice acks nobody
    (said,) = bus.on(NOTICES)  # and is announced locally, for monitors and HIL
    assert said.payload["turn_binding_id"] == turn_binding_id
    with wave.open(str(out), "rb") as wav:
        assert wav.getnframes() == notice_samples


async def test_when_home_returns_turns_carry_on_without_a_notice(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.wav"
    sink = WavSink(out, realtime=False)
    async with EdgeRuntime(file_config(annyeong_wav, out), models=models, sink=sink) as edge:
        await edge.drain(answer_timeout_s=0)
        client = await connect(edge.nats.url)
        try:
            bus = await Collector(client).watch(ACKS)
            await bus.publish(*status(reachable=False))
            await bus.publish(*turn_event("첫번째"))
            await wait_for(lambda: edge.speaker.stats.notices == 1, "the notice")
            await bus.publish(*status(reachable=True))
            await wait_for(lambda: edge.notice.home_reachable, "home to return")
            subject, second = turn_event("두번째")
            await bus.publish(subject, second)
            answer = Event.new(
                "speak",
                {"text": "Welcome back."},
                source="agent.edge_asr",
                sequence_number=0,
                binding_id=second.binding_id,
            )
            await bus.publish(speak_subject("edge_asr", "board"), answer)
            await wait_for(lambda: bus.on(ACKS), "home's answer to play")
        finally:
            await client.close()
        assert edge.notice.notices_played == 1  # nothing said on return, none for turn two
    (ack,) = bus.on(ACKS)
    assert ack.binding_id == second.binding_id and ack.payload["ok"] is True


async def test_a_turn_home_reports_failed_is_heard_as_the_failure_notice(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.wav"
    sink = WavSink(out, realtime=False)
    async with EdgeRuntime(file_config(annyeong_wav, out), models=models, sink=sink) as edge:
        await edge.drain(answer_timeout_s=0)
        client = await connect(edge.nats.url)
        try:
            bus = await Collector(client).watch(ACKS, NOTICES)
            subject, turn = turn_event("실패")
            await bus.publish(subject, turn)
            status_line = Reply("", spoken=False, kind="status", agent="edge_asr")
            failed = Reply("", spoken=False, kind="failed", reason="τ died", agent="edge_asr")
            for seq, reply in enumerate((status_line, failed)):
                event = Event.new(
                    "reply", reply.to_payload(), source="agent.edge_asr", sequence_number=seq,
                    binding_id=turn.binding_id,
                )  # fmt: skip
                await bus.publish(reply_subject("edge_asr", "board"), event)
            await wait_for(lambda: bus.on(NOTICES), "the failure notice")
        finally:
            await client.close()
        assert edge.notice.failure_notices_played == 1  # the status line says nothing aloud
        assert edge.notice.notices_played == 0
        assert edge.speaker.stats.notices == 1
    (said,) = bus.on(NOTICES)
    assert said.payload == {
        "text": edge.config.notice.failure_text,
        "turn_binding_id": turn.binding_id,
    }
    assert bus.on(ACKS) == []  # a local notice acks nobody


async def test_a_spoken_turn_the_bridge_half_refuses_gets_the_notice(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    """The board asks its bridge half to take each turn (edge/handover.py). The half here
    is real, with limits no envelope fits: it refuses the turn, and home never hears it,
    so the board says so aloud, settles the turn and counts it."""
    paired = make_pair(tmp_path / "pair")
    half = replace(paired.edge, limits=replace(paired.edge.limits, max_event_bytes=64))
    core = await _spoken_turn_refused(
        models, annyeong_wav, tmp_path, paired, lambda nc: BridgeCore(half, nc)
    )
    assert sum(core.counters.refused.values()) == 1


async def test_a_spoken_turn_a_full_outbox_cannot_keep_gets_the_notice(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    """The half's outbox is on a disk filled to the last byte: it cannot commit the turn,
    refuses it naming the file, and the board says so aloud (issue 38, item 4)."""
    paired = make_pair(tmp_path / "pair")
    with small_filesystem(tmp_path / "outbox", 512) as small:
        path = store_path(small.path, paired.edge)
        store = OutboxStore(path)
        small.fill()
        core = await _spoken_turn_refused(
            models,
            annyeong_wav,
            tmp_path,
            paired,
            lambda nc: BridgeCore(paired.edge, nc, store=store),
        )
        store.close()
    assert core.counters.refused == {"unstored": 1}
    assert core.store_fault is not None and str(path) in core.store_fault


async def _spoken_turn_refused(
    models: Models,
    wav: Path,
    tmp_path: Path,
    paired: Paired,
    make_core: Callable[[NATS], BridgeCore],
) -> BridgeCore:
    """Speak one turn to an edge whose bridge half ``make_core`` makes; check the turn
    was not taken and the notice said so; the half, for its counters."""
    cores: list[BridgeCore] = []

    @asynccontextmanager
    async def refusing_half(*, nats_url: str, **_: object) -> AsyncIterator[BridgeCore]:
        nc = await nats.connect(nats_url)
        core = make_core(nc)
        await core.start()
        cores.append(core)
        try:
            yield core
        finally:
            await core.close()
            await nc.close()

    out = tmp_path / "out.wav"
    config = replace(
        file_config(wav, out, answer_timeout_s=10),
        bridge=BridgeConfig(half=paired.result.edge_half),
    )
    sink = WavSink(out, realtime=False)
    async with EdgeRuntime(config, models=models, sink=sink, bridge_factory=refusing_half) as edge:
        client = await connect(edge.nats.url)
        try:
            bus = await Collector(client).watch(NOTICES)
            assert await edge.drain() == []  # the notice settles the turn
            # The notice event may reach this client after the turn settled on the board.
            await wait_for(lambda: bus.on(NOTICES), "the notice event")
        finally:
            await client.close()
        (turn,) = edge.asr.turn_published
        assert edge.notice.not_taken_notices_played == 1
        assert edge.summary().not_taken == 1
    (said,) = bus.on(NOTICES)
    assert said.payload == {"text": config.notice.text, "turn_binding_id": turn.binding_id}
    return cores[0]
