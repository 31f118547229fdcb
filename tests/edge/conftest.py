"""Fixtures for the edge: real Vosk and Piper models, Korean speech from espeak-ng, a
real-time PulseAudio null sink, and a running edge on its own loopback NATS."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from edge.asr import VoskRecognizer
from edge.audio.null_server import Pulse, pulse_daemon
from edge.config import AsrConfig, EdgeConfig, RunConfig, WavInput, WavOutput
from edge.errors import PulseError
from edge.models import resolve_piper_voice, resolve_vosk_model
from edge.runtime import Models
from edge.tts import PiperSynthesizer
from shared.event import Event
from shared.subjects import matches

GRAMMAR = ("안녕하세요", "감사합니다")
WAIT_S = 30.0


def speak_korean(text: str, out: Path, *, lead_s: float = 0.6, tail_s: float = 1.2) -> Path:
    """``text`` spoken by espeak-ng -v ko, as 16 kHz mono 16-bit, padded with silence."""
    raw = out.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", "ko", "-w", str(raw), text], check=True, timeout=30)
    subprocess.run(
        [
            "sox",
            str(raw),
            "-r",
            "16000",
            "-c",
            "1",
            "-b",
            "16",
            str(out),
            "pad",
            str(lead_s),
            str(tail_s),
        ],
        check=True,
        timeout=30,
    )
    raw.unlink()
    return out


@pytest.fixture(scope="session")
def models() -> Models:
    """The Korean Vosk model (grammar mode) and the English Piper voice, loaded once."""
    config = EdgeConfig(asr=AsrConfig(grammar=GRAMMAR))
    recognizer = VoskRecognizer(resolve_vosk_model(config.asr.model), grammar=GRAMMAR)
    # Repeatable phoneme durations: the tests compare what played with a second render
    # of the same text, and the voice's own noise moves a sentence's length by 3 %.
    synth = PiperSynthesizer(resolve_piper_voice(config.tts.voice), noise_w_scale=0.0)
    return Models(recognizer, synth)


@pytest.fixture(scope="session")
def speech_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("speech")


@pytest.fixture(scope="session")
def annyeong_wav(speech_dir: Path) -> Path:
    """'안녕하세요' (hello) in Korean, with silence around it."""
    return speak_korean("안녕하세요", speech_dir / "annyeong.wav")


@pytest.fixture(scope="session")
def two_turns_wav(speech_dir: Path) -> Path:
    """'안녕하세요', a pause, then '감사합니다'."""
    first = speak_korean("안녕하세요", speech_dir / "t1.wav", tail_s=1.5)
    second = speak_korean("감사합니다", speech_dir / "t2.wav", lead_s=0.2)
    out = speech_dir / "two_turns.wav"
    subprocess.run(["sox", str(first), str(second), str(out)], check=True, timeout=30)
    return out


def file_config(
    audio_in: Path, audio_out: Path, *, realtime: bool = False, answer_timeout_s: float = 0.0
) -> EdgeConfig:
    """An edge reading and writing WAV files, Korean grammar mode."""
    base = EdgeConfig(
        asr=AsrConfig(grammar=GRAMMAR), run=RunConfig(answer_timeout_s=answer_timeout_s)
    )
    audio = replace(
        base.audio,
        input=WavInput(audio_in, realtime=realtime),
        output=WavOutput(audio_out, realtime=realtime),
    )
    return replace(base, audio=audio)


async def connect(url: str) -> Client:
    """A plain NATS client standing in for home (or a monitor) on the edge's NATS."""
    return await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)


@pytest.fixture(scope="module")
def pulse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulse]:
    """A real-time PulseAudio null sink for one test module, stopped afterwards."""
    try:
        with pulse_daemon(tmp_path_factory.mktemp("pulse")) as daemon:
            yield daemon
    except PulseError as exc:
        pytest.fail(str(exc))


async def wait_for(condition: Callable[[], object], what: str, limit_s: float = WAIT_S) -> None:
    """Poll ``condition()`` until true; fail naming ``what`` after ``limit_s`` seconds."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {limit_s} s waiting for {what}")
        await asyncio.sleep(0.02)


class Collector:
    """Every envelope seen on some subjects of the edge's NATS, in arrival order."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.events: list[tuple[str, Event]] = []

    async def watch(self, *patterns: str) -> Collector:
        for pattern in patterns:

            async def on_message(msg: Msg) -> None:
                self.events.append((msg.subject, Event.from_json(msg.data)))

            await self.client.subscribe(pattern, cb=on_message)
        await self.client.flush(timeout=5)
        return self

    def on(self, pattern: str) -> list[Event]:
        return [event for subject, event in self.events if matches(pattern, subject)]

    async def publish(self, subject: str, event: Event) -> None:
        await self.client.publish(subject, event.to_json())
        await self.client.flush(timeout=5)
