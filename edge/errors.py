"""The edge's exceptions.

    EdgeError
    ├── ModelError          a Vosk model or Piper voice is missing or will not load
    ├── SynthesisFailed     Piper raised while synthesizing (acked as ``ok: false``)
    ├── AudioError          an audio device or file failed
    │   ├── CaptureFailed   the microphone (or input file) failed during a run
    │   ├── PulseError      the private PulseAudio null-sink server would not start
    │   └── PlaybackError   playback to the sink failed (acked as ``ok: false``)
    ├── ButtonError         a push-to-talk source (key, GPIO) cannot be read
    ├── NatsServerError     the loopback nats-server did not start
    └── BridgeUnavailable   the config names a bridge half but no bridge node is installed

Bad configuration is reported as :class:`shared.errors.SchemaError` (every
issue with file, line and key), like every other YAML document of tether.
"""

from __future__ import annotations


class EdgeError(Exception):
    """Base of every error raised by :mod:`edge`."""


class ModelError(EdgeError):
    """A speech model (Vosk) or voice (Piper) is missing or will not load."""


class SynthesisFailed(EdgeError):
    """Piper raised while synthesizing a request; the speech is acked as failed."""


class AudioError(EdgeError):
    """An audio device or audio file failed; the message names which."""


class CaptureFailed(AudioError):
    """The microphone (or the input file) failed during a run; ``edge run`` exits 1."""


class PulseError(AudioError):
    """The private PulseAudio null-sink server is missing or would not start."""


class PlaybackError(AudioError):
    """Playback to the sink failed; the TTS node acks the speech as failed."""


class ButtonError(EdgeError):
    """A push-to-talk source cannot be opened or read."""


class NatsServerError(EdgeError):
    """The loopback nats-server could not be started or did not become ready."""


class BridgeUnavailable(EdgeError):
    """A bridge half is configured but this installation has no edge bridge node."""
