"""Start-up paths of the runtime: push-to-talk through a GPIO file, bad input, the bridge plugin."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from edge.audio import WavSink
from edge.config import BridgeConfig, EndpointingConfig, PushToTalkConfig
from edge.endpoint import GpioValueButton
from edge.errors import AudioError, BridgeUnavailable
from edge.runtime import EdgeRuntime, Models
from shared.event import Event, new_binding_id
from shared.subjects import sensation_partial_subject, speak_subject
from tests.edge.conftest import Collector, connect, file_config, speak_korean, wait_for

pytestmark = pytest.mark.slow


async def test_a_gpio_press_and_release_make_one_turn(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    value = tmp_path / "gpio17-value"
    value.write_text("1\n")  # active low: released
    base = file_config(annyeong_wav, tmp_path / "out.wav", realtime=True)
    ptt = PushToTalkConfig(source="gpio", value_path=value, poll_ms=5)
    config = replace(base, endpointing=EndpointingConfig(mode="push_to_talk", push_to_talk=ptt))
    async with EdgeRuntime(config, models=models, button=GpioValueButton(value, poll_ms=5)) as edge:
        value.write_text("0\n")
        # Hold the button until the phrase (0.6 s of lead, ~1.3 s of speech) has been heard.
        await wait_for(lambda: edge.gate.admitted >= 22, "2.2 s of audio")
        value.write_text("1\n")
        await wait_for(lambda: edge.asr.turn_published, "the turn")
        await edge.drain()
    (turn,) = edge.asr.turn_published
    assert turn.text == "안녕하세요"
    assert turn.endpoint == "push_to_talk"


async def test_an_unreadable_input_file_fails_at_start(models: Models, tmp_path: Path) -> None:
    not_audio = tmp_path / "turn.wav"
    not_audio.write_text("this is not a WAV file")
    config = file_config(not_audio, tmp_path / "out.wav")
    with pytest.raises(AudioError, match=r"turn\.wav: cannot read as WAV"):
        async with EdgeRuntime(config, models=models):
            pass


async def test_a_configured_bridge_half_that_is_missing_is_refused_early(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    base = file_config(annyeong_wav, tmp_path / "out.wav")
    config = replace(base, bridge=BridgeConfig(half=tmp_path / "board.edge.yaml"))
    with pytest.raises(BridgeUnavailable, match=r"board\.edge\.yaml"):
        async with EdgeRuntime(config, models=models):
            pass


async def test_speech_starting_mid_utterance_closes_it_with_what_was_heard(
    models: Models, speech_dir: Path, tmp_path: Path
) -> None:
    # One long utterance: the phrase twice with no pause the endpointer would take for an end.
    long_wav = speak_korean("안녕하세요 안녕하세요 안녕하세요", speech_dir / "long.wav")
    config = file_config(long_wav, tmp_path / "out.wav", realtime=True)
    sink = WavSink(tmp_path / "out.wav", realtime=True)
    async with EdgeRuntime(config, models=models, sink=sink) as edge:
        client = await connect(edge.nats.url)
        try:
            bus = await Collector(client).watch(sensation_partial_subject("board"))
            await wait_for(lambda: bus.on(sensation_partial_subject("board")), "a partial")
            speak = Event.new(
                "speak",
                {"text": "One moment."},
                source="agent.edge_asr",
                sequence_number=0,
                binding_id=new_binding_id(),
            )
            await bus.publish(speak_subject("edge_asr", "board"), speak)
            await edge.drain()
        finally:
            await client.close()
    first = edge.asr.turn_published[0]
    assert first.endpoint == "echo_gate"
    assert first.text.startswith("안녕하세요")
    assert edge.gate.dropped > 0
