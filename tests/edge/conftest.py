"""Fixtures for the edge: real Vosk and Piper models, Korean speech from espeak-ng, a
real-time PulseAudio null sink, and a running edge on its own loopback NATS."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from edge.asr import VoskRecognizer
from edge.audio.device import rescan_devices
from edge.config import AsrConfig, EdgeConfig, RunConfig, WavInput, WavOutput
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
    synth = PiperSynthesizer(resolve_piper_voice(config.tts.voice))
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


@dataclass(frozen=True)
class Pulse:
    """A user PulseAudio daemon with a real-time null sink; its monitor is the default source."""

    env: dict[str, str]
    sink: str


@pytest.fixture(scope="session")
def pulse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulse]:
    """Start ``pulseaudio`` (as root: --system=false) with a null sink; stop it afterwards."""
    if shutil.which("pulseaudio") is None:
        pytest.fail("pulseaudio is not installed (make bootstrap installs DEB_PACKAGES)")
    root = tmp_path_factory.mktemp("pulse")
    runtime, home, config = root / "run", root / "home", root / "config"
    for folder in (runtime, home, config):
        folder.mkdir(mode=0o700)
    socket_path = runtime / "native"
    env = {
        "XDG_RUNTIME_DIR": str(runtime),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(config),
        "PULSE_SERVER": f"unix:{socket_path}",
    }
    sink = "tether_null"
    proc = subprocess.Popen(
        [
            "pulseaudio",
            "--daemonize=no",
            "--system=false",
            "--exit-idle-time=-1",
            "--disallow-exit",
            "--use-pid-file=false",
            "--disable-shm=true",
            "-n",
            f"--load=module-native-protocol-unix socket={socket_path} auth-anonymous=1",
            f"--load=module-null-sink sink_name={sink} rate=16000 channels=1",
        ],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    saved = {key: os.environ.get(key) for key in env}
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            ready = subprocess.run(
                ["pactl", "info"],
                check=False,
                env={**os.environ, **env},
                capture_output=True,
                timeout=10,
            )
            if ready.returncode == 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"pulseaudio did not start: {stderr[-800:]}")
            time.sleep(0.1)
        os.environ.update(env)
        rescan_devices()  # PortAudio listed devices before this server existed
        yield Pulse(env, sink)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        proc.terminate()
        rescan_devices()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


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
