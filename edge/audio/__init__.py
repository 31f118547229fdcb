"""Audio I/O behind one small interface: a source of frames, a sink that plays chunks.

:class:`AudioSource` yields :class:`AudioFrame` s (16-bit mono PCM stamped with the
monotonic time of their first sample); :class:`AudioSink` plays an async stream of
int16 chunks at the voice's rate and says whether it was interrupted. Two of each:
sounddevice (:mod:`edge.audio.device`) and WAV files (:mod:`edge.audio.wavfile`).
Audio only ever travels in-process; it never becomes an event.
"""

from __future__ import annotations

from edge.audio.base import AudioFrame, AudioSink, AudioSource, PlaybackResult
from edge.audio.device import SoundDeviceSink, SoundDeviceSource
from edge.audio.wavfile import WavSink, WavSource

__all__ = [
    "AudioFrame",
    "AudioSink",
    "AudioSource",
    "PlaybackResult",
    "SoundDeviceSink",
    "SoundDeviceSource",
    "WavSink",
    "WavSource",
]
