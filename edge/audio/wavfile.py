"""WAV files as microphone and speaker: used by tests, HIL and ``edge run --audio-in/--audio-out``.

Both can run in real time (a file source then behaves like a microphone, a file
sink takes as long as a speaker would), or as fast as possible.
"""

from __future__ import annotations

import asyncio
import time
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from edge.audio.base import SAMPLE_WIDTH, AudioFrame, Pcm, PlaybackResult, slices
from edge.errors import AudioError, PlaybackError
from shared.lifecycle import Service

_SLICE_S = 0.05


def read_wav_mono16(path: Path, sample_rate: int) -> Pcm:
    """The whole file as mono int16 at ``sample_rate`` (channels mixed down, resampled)."""
    try:
        with wave.open(str(path), "rb") as wav:
            channels, width, rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
            raw = wav.readframes(wav.getnframes())
    except (OSError, EOFError, wave.Error) as exc:
        raise AudioError(f"{path}: cannot read as WAV: {exc}") from exc
    if width != SAMPLE_WIDTH:
        raise AudioError(f"{path}: expected 16-bit PCM, got {8 * width}-bit samples")
    audio = np.frombuffer(raw, dtype="<i2").astype(np.float64)
    if channels > 1:
        audio = audio.reshape(-1, channels).mean(axis=1)
    audio = resample(audio, rate, sample_rate)
    return np.clip(np.round(audio), -32768, 32767).astype(np.int16)


def resample(audio: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    """Float ``audio`` at ``rate`` as float samples at ``sample_rate``.

    Linear interpolation is enough for speech recognition input at these rates.
    """
    audio = np.asarray(audio, dtype=np.float64)
    if rate == sample_rate or not len(audio):
        return audio
    n_out = round(len(audio) * sample_rate / rate)
    return np.asarray(
        np.interp(np.arange(n_out) * rate / sample_rate, np.arange(len(audio)), audio)
    )


class WavSource(Service):
    """Frames from a WAV file, in real time or as fast as they are read."""

    def __init__(
        self, path: Path, *, sample_rate: int = 16000, block_ms: int = 100, realtime: bool = True
    ) -> None:
        self.path = path
        self.sample_rate = sample_rate
        self.block = max(1, sample_rate * block_ms // 1000)
        self.realtime = realtime
        self._audio: Pcm | None = None
        self._closed = False

    async def start(self) -> None:
        """Read the whole file."""
        self._audio = await asyncio.to_thread(read_wav_mono16, self.path, self.sample_rate)

    async def close(self) -> None:
        """Stop handing out frames."""
        self._closed = True

    async def frames(self) -> AsyncIterator[AudioFrame]:
        """Every block of the file; paced by the clock when ``realtime``."""
        if self._audio is None:
            raise AudioError(f"{self.path}: source used outside its 'async with'")
        start = time.monotonic()
        for index, offset in enumerate(range(0, len(self._audio), self.block)):
            if self._closed:
                return
            due = start + index * self.block / self.sample_rate
            if self.realtime:
                # A frame exists once its last sample has been "heard".
                await asyncio.sleep(
                    max(0.0, due + self.block / self.sample_rate - time.monotonic())
                )
            else:
                await asyncio.sleep(0)
            pcm = self._audio[offset : offset + self.block]
            captured_at = due if self.realtime else time.monotonic()
            yield AudioFrame(pcm.tobytes(), self.sample_rate, captured_at)


class WavSink(Service):
    """Appends everything played to one WAV file; its rate is the first voice's rate.

    The file is opened on first playback, so a sink that cannot write fails that
    playback (and its ack) rather than the start of the edge.
    """

    def __init__(self, path: Path, *, realtime: bool = True) -> None:
        self.path = path
        self.realtime = realtime
        self._wav: wave.Wave_write | None = None
        self._file: BinaryIO | None = None
        self._rate: int | None = None
        self.samples_written = 0

    async def close(self) -> None:
        """Close the WAV file, if playback opened one."""
        if self._wav is not None:
            self._wav.close()
            self._wav = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self, sample_rate: int) -> wave.Wave_write:
        if self._wav is None:
            try:
                # Opened here, not by wave.open(path): its half-built writer warns on failure.
                self._file = self.path.open("wb")
            except OSError as exc:
                raise PlaybackError(f"{self.path}: cannot open for writing: {exc}") from exc
            wav = wave.open(self._file, "wb")  # noqa: SIM115 - open across plays
            wav.setnchannels(1)
            wav.setsampwidth(SAMPLE_WIDTH)
            wav.setframerate(sample_rate)
            self._wav, self._rate = wav, sample_rate
        elif sample_rate != self._rate:
            raise PlaybackError(
                f"{self.path}: already written at {self._rate} Hz, cannot append {sample_rate} Hz"
            )
        return self._wav

    async def play(
        self, chunks: AsyncIterator[Pcm], sample_rate: int, stop: asyncio.Event
    ) -> PlaybackResult:
        """Write each chunk, pacing by the clock when ``realtime``; stop between slices."""
        wav = self._open(sample_rate)
        played, first, interrupted = 0, None, False
        slice_len = int(sample_rate * _SLICE_S)
        clock = time.monotonic()
        async for chunk in chunks:
            for piece in slices(chunk, slice_len):
                if stop.is_set():
                    interrupted = True
                    break
                try:
                    wav.writeframes(piece.astype("<i2").tobytes())
                except OSError as exc:
                    raise PlaybackError(f"{self.path}: write failed: {exc}") from exc
                now = time.monotonic()
                if first is None:
                    first = clock = now
                played += len(piece)
                self.samples_written += len(piece)
                if self.realtime:
                    await asyncio.sleep(max(0.0, clock + played / sample_rate - time.monotonic()))
                else:
                    await asyncio.sleep(0)
            if interrupted:
                break
        if self.realtime and not interrupted and first is not None:
            await asyncio.sleep(max(0.0, first + played / sample_rate - time.monotonic()))
        return PlaybackResult(played, sample_rate, interrupted, first, time.monotonic())
