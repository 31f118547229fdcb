"""Spool folders as microphone and speaker (edge/audio/spool.py), alone and in a running edge."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import wave
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edge.audio import PlaybackTag, SpoolSink, SpoolSource, tagged
from edge.audio.base import AudioFrame, Pcm
from edge.config import AsrConfig, EdgeConfig, SpoolInput, SpoolOutput
from edge.runtime import EdgeRuntime, Models
from shared.event import Event, new_binding_id
from shared.subjects import speak_subject
from tests.edge.conftest import GRAMMAR, Collector, connect, wait_for

RATE = 16000
BLOCK = 1600  # 100 ms


def write_wav(path: Path, pcm: Pcm, *, rate: int = RATE, channels: int = 1, width: int = 2) -> Path:
    """A WAV file written the way a harness must: to NAME.tmp, then renamed."""
    tmp = path.with_suffix(".tmp")
    with wave.open(str(tmp), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(width)
        wav.setframerate(rate)
        wav.writeframes(pcm.tobytes())
    os.replace(tmp, path)
    return path


def ramp(samples: int, start: int = 1) -> Pcm:
    """Distinct non-zero samples, so every one can be found again in the frames."""
    return (np.arange(samples) % 30000 + start).astype(np.int16)


async def collect(frames: AsyncIterator[AudioFrame], count: int) -> list[AudioFrame]:
    got: list[AudioFrame] = []
    async with asyncio.timeout(30):
        async for frame in frames:
            got.append(frame)
            if len(got) == count:
                break
    return got


def pcm_of(frames: list[AudioFrame]) -> Pcm:
    return np.frombuffer(b"".join(f.pcm for f in frames), dtype=np.int16)


async def test_an_empty_spool_is_silence_in_real_time(tmp_path: Path) -> None:
    async with SpoolSource(tmp_path / "in") as source:
        frames = await collect(source.frames(), 3)
    assert all(f.samples == BLOCK and not any(f.pcm) for f in frames)
    # Stamped one block apart, like a microphone's blocks.
    gaps = [b.captured_at - a.captured_at for a, b in itertools.pairwise(frames)]
    assert gaps == pytest.approx([0.1, 0.1])
    assert (tmp_path / "in/done").is_dir() and (tmp_path / "in/rejected").is_dir()


async def test_spooled_files_are_heard_in_name_order_then_moved_to_done(tmp_path: Path) -> None:
    spool = tmp_path / "in"
    async with SpoolSource(spool) as source:
        # Both appear before the first frame: name order, not arrival order, decides.
        write_wav(spool / "b.wav", ramp(2 * BLOCK, start=5000))
        write_wav(spool / "a.wav", ramp(BLOCK + 400, start=1))
        (spool / "c.tmp").write_bytes(b"half-written")  # not renamed yet: never read
        frames = await collect(source.frames(), 6)
    audio = pcm_of(frames)
    a, b = ramp(BLOCK + 400, start=1), ramp(2 * BLOCK, start=5000)
    # a.wav fills one block and part of the next (padded with silence), then b.wav's two.
    assert np.array_equal(audio[: len(a)], a)
    assert not audio[len(a) : 2 * BLOCK].any()
    assert np.array_equal(audio[2 * BLOCK : 4 * BLOCK], b)
    assert not audio[4 * BLOCK :].any()
    assert sorted(p.name for p in (spool / "done").iterdir()) == ["a.wav", "b.wav"]
    assert source.stats.played == 2 and source.stats.rejected == 0
    assert (spool / "c.tmp").exists()


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("text.wav", b"this is not a WAV file", "not a readable WAV file"),
        ("stereo.wav", None, "expected 16-bit mono PCM, got 16-bit, 2 channel(s)"),
        ("eight-bit.wav", None, "expected 16-bit mono PCM, got 8-bit, 1 channel(s)"),
    ],
)
async def test_a_malformed_file_is_rejected_counted_and_listening_goes_on(
    tmp_path: Path, name: str, content: bytes | None, reason: str
) -> None:
    spool = tmp_path / "in"
    spool.mkdir()
    bad = spool / name
    if content is not None:
        bad.write_bytes(content)
    elif name.startswith("stereo"):
        write_wav(bad, ramp(2 * BLOCK), channels=2)
    else:
        write_wav(bad, np.full(BLOCK, 0x7F7F, dtype=np.int16), width=1)
    async with SpoolSource(spool) as source:
        write_wav(spool / "z-good.wav", ramp(BLOCK))
        frames = await collect(source.frames(), 2)
    assert source.stats.rejected == 1 and source.stats.played == 1
    assert reason in (source.stats.last_rejection or "")
    assert (spool / "rejected" / name).exists() and not bad.exists()
    assert reason in (spool / "rejected" / f"{name}.error").read_text()
    # The good file after it was heard at once, in the first frame.
    assert np.array_equal(pcm_of(frames)[:BLOCK], ramp(BLOCK))


async def chunks_of(*parts: Pcm) -> AsyncIterator[Pcm]:
    for part in parts:
        yield part


def read_back(path: Path) -> tuple[int, Pcm]:
    with wave.open(str(path), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth()) == (1, 2)
        return wav.getframerate(), np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


async def test_each_playback_is_one_named_wav_paced_like_a_speaker(tmp_path: Path) -> None:
    out = tmp_path / "out"
    speech = ramp(11025)  # half a second at 22050 Hz
    async with SpoolSink(out) as sink:
        with tagged(PlaybackTag("bind-1", "Hello there.")):
            result = await sink.play(
                chunks_of(speech[:5000], speech[5000:]), 22050, asyncio.Event()
            )
        await sink.play(chunks_of(ramp(100)), 22050, asyncio.Event())  # untagged
    assert sorted(p.name for p in out.iterdir()) == [
        "000001-bind-1.json",
        "000001-bind-1.wav",
        "000002-speech.json",
        "000002-speech.wav",
    ]
    rate, audio = read_back(out / "000001-bind-1.wav")
    assert rate == 22050 and np.array_equal(audio, speech)
    described = json.loads((out / "000001-bind-1.json").read_text())
    assert described == {
        "sequence": 1,
        "label": "bind-1",
        "text": "Hello there.",
        "sample_rate": 22050,
        "samples": 11025,
        "duration_s": 0.5,
        "interrupted": False,
        "wav": "000001-bind-1.wav",
    }
    # Real time: it took at least as long as the audio lasts.
    assert result.first_audio_at is not None
    assert result.ended_at - result.first_audio_at >= 0.5
    # A new sink (the edge restarted) keeps counting instead of overwriting.
    async with SpoolSink(out) as again:
        with tagged(PlaybackTag("../odd name")):
            await again.play(chunks_of(ramp(10)), 22050, asyncio.Event())
    assert (out / "000003-odd_name.wav").exists()


def hidden_files(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.startswith(".")]


async def test_a_stopped_playback_keeps_what_was_played_and_says_so(tmp_path: Path) -> None:
    stop = asyncio.Event()

    async def long_speech() -> AsyncIterator[Pcm]:
        yield ramp(16000)
        stop.set()  # a barge-in while the second sentence is on its way
        yield ramp(16000)

    async with SpoolSink(tmp_path) as sink:
        result = await sink.play(long_speech(), 16000, stop)
    assert result.interrupted
    described = json.loads((tmp_path / "000001-speech.json").read_text())
    assert described["interrupted"] is True and described["samples"] == result.samples_played
    assert 0 < len(read_back(tmp_path / "000001-speech.wav")[1]) < 32000
    assert not hidden_files(tmp_path)  # no temporary file left behind


@pytest.mark.slow
async def test_a_running_edge_hears_the_spool_rejects_junk_and_speaks_into_files(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    spool_in, spool_out = tmp_path / "in", tmp_path / "out"
    config = EdgeConfig(asr=AsrConfig(grammar=GRAMMAR))
    config = replace(
        config,
        audio=replace(config.audio, input=SpoolInput(spool_in), output=SpoolOutput(spool_out)),
    )
    async with EdgeRuntime(config, models=models) as edge:
        (spool_in / "1-junk.tmp").write_text("not audio")
        os.replace(spool_in / "1-junk.tmp", spool_in / "1-junk.wav")
        os.link(annyeong_wav, spool_in / "2-hello.tmp")
        os.replace(spool_in / "2-hello.tmp", spool_in / "2-hello.wav")
        await wait_for(lambda: edge.asr.turn_published, "the spooled turn")
        await wait_for(lambda: edge.capture.source.stats.played, "the file to be heard out")
        assert edge.capture.running  # the rejected file did not stop the microphone
        client = await connect(edge.nats.url)
        try:
            bus = await Collector(client).watch("events.action.speech.completed.>")
            binding = new_binding_id()
            speak = Event.new(
                "speak",
                {"text": "Hello."},
                source="agent.edge_asr",
                sequence_number=0,
                binding_id=binding,
            )
            await bus.publish(speak_subject("edge_asr", "board"), speak)
            await wait_for(lambda: bus.on("events.action.speech.completed.>"), "the ack")
        finally:
            await client.close()
    (turn,) = edge.asr.turn_published
    assert turn.text == "안녕하세요"
    assert (spool_in / "done/2-hello.wav").exists()
    assert (spool_in / "rejected/1-junk.wav").exists()
    assert "not a readable WAV file" in (spool_in / "rejected/1-junk.wav.error").read_text()
    (played,) = spool_out.glob("*.wav")
    assert played.name == f"000001-{binding}.wav"
    assert json.loads(played.with_suffix(".json").read_text())["text"] == "Hello."
    assert len(read_back(played)[1]) > 0
