"""sounddevice through a real-time PulseAudio null sink: capture, playback and the echo gate.

The board's microphone is the null sink's monitor, so whatever is played into
the sink (by the test, or by the board's own speaker) is heard in real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from edge.audio import SoundDeviceSink, SoundDeviceSource
from edge.audio.null_server import Pulse
from edge.audio.wavfile import read_wav_mono16
from edge.runtime import EdgeRuntime, Models
from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speak_subject
from tests.edge.conftest import Collector, connect, file_config, wait_for

pytestmark = pytest.mark.slow

DEVICE = "pulse"  # ALSA's PulseAudio plugin: default sink, and its monitor as default source


async def _once(pcm: np.ndarray) -> AsyncIterator[np.ndarray]:
    yield pcm


async def test_a_phrase_played_into_the_null_sink_arrives_as_a_turn(
    pulse: Pulse, models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    config = file_config(annyeong_wav, tmp_path / "out.wav")
    source = SoundDeviceSource(DEVICE)
    async with EdgeRuntime(config, models=models, source=source) as edge:
        client = await connect(edge.nats.url)
        try:
            seen = await Collector(client).watch(sensation_turn_subject("board"))
            pcm = read_wav_mono16(annyeong_wav, 16000)
            async with SoundDeviceSink(DEVICE) as speaker:
                played = await speaker.play(_once(pcm), 16000, asyncio.Event())
            assert played.samples_played == len(pcm)
            await wait_for(lambda: seen.on(sensation_turn_subject("board")), "the turn")
        finally:
            await client.close()
        assert source.overflows == 0
    (turn,) = seen.on(sensation_turn_subject("board"))
    assert turn.payload["text"] == "안녕하세요"
    assert turn.binding_id


@pytest.mark.parametrize("gate_on", [True, False], ids=["gated", "control-without-gate"])
async def test_the_boards_own_speech_never_reaches_the_recognizer(
    pulse: Pulse, models: Models, annyeong_wav: Path, tmp_path: Path, gate_on: bool
) -> None:
    config = file_config(annyeong_wav, tmp_path / "out.wav")
    source = SoundDeviceSource(DEVICE)
    sink = SoundDeviceSink(DEVICE)
    binding_id = new_binding_id()
    async with EdgeRuntime(config, models=models, source=source, sink=sink) as edge:
        if not gate_on:
            # The control: prove the speaker really is audible at the microphone.
            judge = edge.gate.admits
            edge.gate.admits = lambda frame: judge(frame) or True  # type: ignore[method-assign]
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch("events.action.speech.completed.*")
            event = Event.new(
                "speak",
                {"text": "Hello. Thank you very much, goodbye."},
                source="agent.edge_asr",
                sequence_number=0,
                binding_id=binding_id,
            )
            await acks.publish(speak_subject("edge_asr", "board"), event)
            await wait_for(lambda: acks.on("events.action.speech.completed.*"), "the ack")
            # Let capture run well past the tail before judging.
            seen = edge.gate.admitted + edge.gate.dropped
            await wait_for(
                lambda: edge.gate.admitted + edge.gate.dropped >= seen + 8, "frames after the tail"
            )
            await edge.asr.wait_idle()
        finally:
            await client.close()
        heard_s = edge.asr.stats.audio_s
        dropped = edge.gate.dropped
    if gate_on:
        assert dropped > 10  # the speech was there, at the microphone...
        assert heard_s == 0.0  # ...and none of it reached the recognizer
    else:
        assert heard_s > 0.5


async def test_playback_through_sounddevice_acks_ok(
    pulse: Pulse, models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    config = file_config(annyeong_wav, tmp_path / "unused.wav")
    binding_id = new_binding_id()
    async with EdgeRuntime(
        config, models=models, source=SoundDeviceSource(DEVICE), sink=SoundDeviceSink(DEVICE)
    ) as edge:
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch("events.action.speech.completed.*")
            event = Event.new(
                "speak",
                {"text": "Hi."},
                source="agent.edge_asr",
                sequence_number=0,
                binding_id=binding_id,
            )
            await acks.publish(speak_subject("edge_asr", "board"), event)
            await wait_for(lambda: acks.on("events.action.speech.completed.*"), "the ack")
        finally:
            await client.close()
    (ack,) = acks.on("events.action.speech.completed.*")
    assert ack.binding_id == binding_id and ack.payload["ok"] is True
    assert ack.payload["duration_s"] > 0.2
