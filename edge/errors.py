"""The edge's exceptions.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    EdgeError
    ├── ModelError          (UnavailableError) a Vosk model or Piper voice is missing or
    │                       will not load
    ├── SynthesisFailed     Piper raised while synthesizing (acked as ``ok: false``)
    ├── AudioError          an audio device or file failed
    │   ├── CaptureFailed   the microphone (or input file) failed during a run
    │   ├── PulseError      (UnavailableError) the private PulseAudio null-sink server
    │   │                   would not start
    │   └── PlaybackError   playback to the sink failed (acked as ``ok: false``)
    ├── ButtonError         (UnavailableError) a push-to-talk source (key, GPIO) cannot be read
    ├── NatsServerError     (UnavailableError) the loopback nats-server did not start
    ├── BridgeUnavailable   (UnavailableError) the config names a bridge half but no bridge
    │                       node is installed
    ├── NotTaken            (RefusedError) the edge bridge half did not take an event that
    │                       must cross: refused, expired, or no answer within its TTL
    └── TuiError            the TUI's, drawn in :mod:`edge.tui.errors`

Bad configuration is reported as :class:`shared.errors.SchemaError` (every
issue with file, line and key), like every other YAML document of tether.
"""

from __future__ import annotations

from shared.errors import RefusedError, TetherError, UnavailableError


class EdgeError(TetherError):
    """Base of every error raised by :mod:`edge`."""


class ModelError(EdgeError, UnavailableError):
    """A speech model (Vosk) or voice (Piper) is missing or will not load."""


class SynthesisFailed(EdgeError):
    """Piper raised while synthesizing a request; the speech is acked as failed."""


class AudioError(EdgeError):
    """An audio device or audio file failed; the message names which."""


class CaptureFailed(AudioError):
    """The microphone (or the input file) failed during a run; ``edge run`` exits 1."""


class PulseError(AudioError, UnavailableError):
    """The private PulseAudio null-sink server is missing or would not start."""


class PlaybackError(AudioError):
    """Playback to the sink failed; the TTS node acks the speech as failed."""


class ButtonError(EdgeError, UnavailableError):
    """A push-to-talk source cannot be opened or read."""


class NatsServerError(EdgeError, UnavailableError):
    """The loopback nats-server could not be started or did not become ready."""


class BridgeUnavailable(EdgeError, UnavailableError):
    """A bridge half is configured but this installation has no edge bridge node."""


class NotTaken(EdgeError, RefusedError):
    """The edge bridge half did not take an event that must cross to home.

    ``verdict`` is the half's (``refused``, ``expired``), or ``unanswered`` when no
    half took it within its TTL, or ``unsent`` when the local NATS would not carry
    the request at all.
    """

    def __init__(
        self, subject: str, event_id: str, binding_id: str | None, verdict: str, reason: str
    ) -> None:
        super().__init__(f"home will not get event {event_id} on {subject}: {reason}")
        self.subject = subject
        self.event_id = event_id
        self.binding_id = binding_id
        self.verdict = verdict
        self.reason = reason
