"""Audio I/O behind one small interface: a source of frames, a sink that plays chunks.

:class:`AudioSource` yields :class:`AudioFrame` s (16-bit mono PCM stamped with the
monotonic time of their first sample); :class:`AudioSink` plays an async stream of
int16 chunks at the voice's rate and says whether it was interrupted. Three of each:
sounddevice (:mod:`edge.audio.device`), WAV files (:mod:`edge.audio.wavfile`) and
spool folders for boards with no sound card (:mod:`edge.audio.spool`).
Audio only ever travels in-process; it never becomes an event.
"""

from __future__ import annotations

from edge.audio.base import (
    AudioFrame,
    AudioSink,
    AudioSource,
    PlaybackResult,
    PlaybackTag,
    tagged,
)
from edge.audio.device import SoundDeviceSink, SoundDeviceSource
from edge.audio.spool import SpoolSink, SpoolSource
from edge.audio.wavfile import WavSink, WavSource

__all__ = [
    "AudioFrame",
    "AudioSink",
    "AudioSource",
    "PlaybackResult",
    "PlaybackTag",
    "SoundDeviceSink",
    "SoundDeviceSource",
    "SpoolSink",
    "SpoolSource",
    "WavSink",
    "WavSource",
    "tagged",
]
