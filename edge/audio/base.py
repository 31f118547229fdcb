"""The audio interface: what every source and sink of the edge provides."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from shared.lifecycle import Lifetime

Pcm = npt.NDArray[np.int16]

SAMPLE_WIDTH = 2  # bytes per sample: 16-bit PCM everywhere


@dataclass(frozen=True)
class AudioFrame:
    """One block of captured mono 16-bit PCM and when its first sample was heard."""

    pcm: bytes
    sample_rate: int
    captured_at: float  # time.monotonic() of the first sample

    @property
    def samples(self) -> int:
        """Number of samples in the frame."""
        return len(self.pcm) // SAMPLE_WIDTH

    @property
    def duration_s(self) -> float:
        """Length of the frame in seconds."""
        return self.samples / self.sample_rate

    @property
    def ends_at(self) -> float:
        """Monotonic time just after the frame's last sample."""
        return self.captured_at + self.duration_s


class SampleClock:
    """Stamps captured blocks by the samples counted since an anchor, not by callback time.

    A sound server hands blocks over in bursts, so the time a callback runs says when a
    block arrived, some milliseconds late; counted samples say when it was heard. Frame
    times then step by exactly one block, and a span of quiet measured between two
    stamps is as long as the blocks in it (the endpointer's windows are whole blocks).
    A block can arrive late but never early: one that arrives before its count says, moves
    the count back to it; one later by more than ``slip_s`` than its count says (blocks
    dropped on an overflow, a suspended device) anchors the count on it again.
    """

    def __init__(self, sample_rate: int, slip_s: float = 0.1) -> None:
        self.sample_rate = sample_rate
        self.slip_s = slip_s
        self.anchors = 0
        self._next: float | None = None

    def stamp(self, arrived_at: float, samples: int) -> float:
        """When the first of ``samples`` was heard, for a block that arrived at ``arrived_at``."""
        duration = samples / self.sample_rate
        heard_at = arrived_at - duration
        if self._next is None or heard_at > self._next + self.slip_s:
            self._next = heard_at
            self.anchors += 1
        elif heard_at < self._next:
            self._next = heard_at
        stamped = self._next
        self._next = stamped + duration
        return stamped


@dataclass(frozen=True)
class PlaybackResult:
    """What one :meth:`AudioSink.play` did."""

    samples_played: int
    sample_rate: int
    interrupted: bool
    first_audio_at: float | None  # monotonic time the first chunk reached the device
    ended_at: float

    @property
    def duration_s(self) -> float:
        """Seconds of audio that reached the sink."""
        return self.samples_played / self.sample_rate if self.sample_rate else 0.0


@dataclass(frozen=True)
class PlaybackTag:
    """What is being played: a label for the file name and the text it says."""

    label: str
    text: str = ""


# The speaker sets this around each ``play`` call; sinks that name their output read it.
# A context variable keeps the AudioSink protocol unchanged for every other sink.
playback_tag: ContextVar[PlaybackTag | None] = ContextVar("playback_tag", default=None)


@contextlib.contextmanager
def tagged(tag: PlaybackTag) -> Iterator[None]:
    """Label the playbacks started inside the ``with`` block (in this task)."""
    token = playback_tag.set(tag)
    try:
        yield
    finally:
        playback_tag.reset(token)


class AudioSource(Lifetime, Protocol):
    """A microphone (or a stand-in): an async context manager that yields frames."""

    sample_rate: int

    def frames(self) -> AsyncIterator[AudioFrame]:
        """Captured frames in order; ends when the source is exhausted or closed."""
        ...


class AudioSink(Lifetime, Protocol):
    """A speaker (or a stand-in): an async context manager that plays streams of chunks."""

    async def play(
        self, chunks: AsyncIterator[Pcm], sample_rate: int, stop: asyncio.Event
    ) -> PlaybackResult:
        """Play every chunk in order until done or ``stop`` is set.

        Raises :class:`edge.errors.PlaybackError` if the device or file fails.
        """
        ...


def slices(pcm: Pcm, size: int) -> list[Pcm]:
    """``pcm`` cut into pieces of at most ``size`` samples (how often stop is checked)."""
    return [pcm[i : i + size] for i in range(0, len(pcm), size)]
