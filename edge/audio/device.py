"""Sound devices through sounddevice (PortAudio): 16 kHz mono capture, playback at any rate.

PortAudio calls back on its own thread; frames cross to the event loop with
``call_soon_threadsafe`` into a bounded queue. Blocking writes run in a worker
thread, in short slices so that a barge-in stops playback within ~50 ms.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import sounddevice as sd

from edge.audio.base import AudioFrame, Pcm, PlaybackResult, SampleClock, slices
from edge.errors import AudioError, PlaybackError
from shared.lifecycle import Service

log = logging.getLogger(__name__)

_SLICE_S = 0.05
_QUEUE_S = 10.0  # of blocks waiting before the oldest are dropped (and counted)


class SoundDeviceSource(Service):
    """Capture from a PortAudio input device (``None``: the system default)."""

    def __init__(
        self, device: str | None = None, *, sample_rate: int = 16000, block_ms: int = 100
    ) -> None:
        self.device = device
        self.sample_rate = sample_rate
        self.block = max(1, sample_rate * block_ms // 1000)
        self.overflows = 0
        self.dropped_frames = 0
        self._clock = SampleClock(sample_rate)
        self._queue: asyncio.Queue[AudioFrame | None] = asyncio.Queue(
            max(1, round(_QUEUE_S * sample_rate / self.block))
        )
        self._stream: sd.RawInputStream | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Open and start the capture stream (AudioError naming the device if it cannot)."""
        self._loop = asyncio.get_running_loop()
        try:
            self._stream = sd.RawInputStream(
                samplerate=self.sample_rate,
                blocksize=self.block,
                device=self.device,
                channels=1,
                dtype="int16",
                callback=self._callback,
            )
            self._stream.start()
        except (sd.PortAudioError, ValueError) as exc:
            raise AudioError(
                f"capture device {self.device or 'default'!r}: {exc}; {_known('input')}"
            ) from exc

    async def close(self) -> None:
        """Close the stream and end the frames."""
        stream, self._stream = self._stream, None
        if stream is not None:
            await asyncio.to_thread(_close_stream, stream)
        self._put(None)

    def _callback(self, indata: Any, frames: int, time_info: Any, status: Any) -> None:
        heard_at = self._clock.stamp(time.monotonic(), frames)
        if status.input_overflow:
            self.overflows += 1
        frame = AudioFrame(bytes(indata), self.sample_rate, heard_at)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._put, frame)

    def _put(self, frame: AudioFrame | None) -> None:
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped_frames += 1
            log.warning("capture queue full: dropped a frame (%d so far)", self.dropped_frames)
        self._queue.put_nowait(frame)

    async def frames(self) -> AsyncIterator[AudioFrame]:
        """Captured frames until the source is closed."""
        while (frame := await self._queue.get()) is not None:
            yield frame


def _known(kind: str) -> str:
    """The devices PortAudio offers for ``kind`` (input/output), to put in an error."""
    try:
        devices = sd.query_devices()
    except sd.PortAudioError:
        return "PortAudio lists no devices"
    names = [d["name"] for d in devices if d[f"max_{kind}_channels"] > 0]
    if not names:
        return f"there is no {kind} device at all (no sound card or sound server?)"
    return f"{kind} devices: {', '.join(repr(n) for n in names)}"


def _close_stream(stream: Any) -> None:
    try:
        stream.stop()
    finally:
        stream.close()


class SoundDeviceSink(Service):
    """Playback on a PortAudio output device, one stream per utterance at its rate."""

    def __init__(self, device: str | None = None) -> None:
        self.device = device

    async def play(
        self, chunks: AsyncIterator[Pcm], sample_rate: int, stop: asyncio.Event
    ) -> PlaybackResult:
        """Play each chunk in real time; abort the stream as soon as ``stop`` is set."""
        stream = await asyncio.to_thread(self._open, sample_rate)
        played, first, interrupted = 0, None, False
        slice_len = int(sample_rate * _SLICE_S)
        try:
            async for chunk in chunks:
                for piece in slices(chunk, slice_len):
                    if stop.is_set():
                        interrupted = True
                        break
                    if first is None:
                        first = time.monotonic()
                    await asyncio.to_thread(self._write, stream, piece)
                    played += len(piece)
                if interrupted:
                    break
            if interrupted:
                await asyncio.to_thread(stream.abort)
            else:
                # Stopping (not aborting) plays out what is still buffered.
                await asyncio.to_thread(stream.stop)
        finally:
            await asyncio.to_thread(stream.close)
        return PlaybackResult(played, sample_rate, interrupted, first, time.monotonic())

    def _open(self, sample_rate: int) -> Any:
        try:
            stream = sd.RawOutputStream(
                samplerate=sample_rate, device=self.device, channels=1, dtype="int16"
            )
            stream.start()
        except (sd.PortAudioError, ValueError) as exc:
            raise PlaybackError(
                f"playback device {self.device or 'default'!r}: {exc}; {_known('output')}"
            ) from exc
        return stream

    def _write(self, stream: Any, piece: Pcm) -> None:
        try:
            stream.write(np.ascontiguousarray(piece, dtype=np.int16).tobytes())
        except sd.PortAudioError as exc:
            raise PlaybackError(f"playback device {self.device or 'default'!r}: {exc}") from exc


def rescan_devices() -> None:
    """Re-enumerate sound devices (PortAudio lists them once, at initialization).

    Call with no stream open: after a sound server starts, or a USB device is
    plugged in. sounddevice documents this terminate/initialize pair for it.
    """
    sd._terminate()
    sd._initialize()
