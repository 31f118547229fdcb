"""The typed shape of ``edge.yaml``: one frozen dataclass per section, defaults that work."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from edge.models import DEFAULT_PIPER_VOICE, DEFAULT_VOSK_MODEL

EndpointMode = Literal["vad", "push_to_talk", "both", "wake"]
WakeModel = Literal["okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"]
ButtonKind = Literal["none", "key", "gpio"]

DEFAULT_NOTICE = "I can't reach home right now. Please try again in a little while."
DEFAULT_FAILURE_NOTICE = "Sorry, something went wrong at home. Please try again."


@dataclass(frozen=True)
class WavInput:
    """A WAV file standing in for the microphone (16 kHz mono 16-bit, or converted)."""

    path: Path
    realtime: bool = True


@dataclass(frozen=True)
class DeviceInput:
    """A sounddevice (PortAudio) capture device; ``None`` is the system default."""

    device: str | None = None


@dataclass(frozen=True)
class WavOutput:
    """A WAV file standing in for the speaker; every utterance is appended in order."""

    path: Path
    realtime: bool = True


@dataclass(frozen=True)
class DeviceOutput:
    """A sounddevice (PortAudio) playback device; ``None`` is the system default."""

    device: str | None = None


@dataclass(frozen=True)
class SpoolInput:
    """A folder standing in for the microphone: silence, then each ``*.wav`` dropped into it.

    Writers write ``NAME.tmp`` and rename it to ``NAME.wav``; see :mod:`edge.audio.spool`.
    """

    dir: Path


@dataclass(frozen=True)
class SpoolOutput:
    """A folder standing in for the speaker: one ``NNNNNN-LABEL.wav`` per playback, real time."""

    dir: Path


AudioInput = WavInput | DeviceInput | SpoolInput
AudioOutput = WavOutput | DeviceOutput | SpoolOutput


@dataclass(frozen=True)
class AudioConfig:
    """Where sound comes from and goes to, and the capture block size.

    The endpointer decides once per block, so a block of 50 ms ends an utterance within
    50 ms of its quiet window (100 ms blocks made the 250 ms window 300).
    """

    input: AudioInput = field(default_factory=DeviceInput)
    output: AudioOutput = field(default_factory=DeviceOutput)
    block_ms: int = 50


@dataclass(frozen=True)
class VadConfig:
    """Energy voice-activity endpointing: speech is a frame louder than ``threshold_db``."""

    threshold_db: float = -40.0
    start_ms: int = 100
    end_silence_ms: int = 600
    pre_roll_ms: int = 300
    max_utterance_s: float = 15.0
    # End sooner, after this much quiet, once the recognizer has decoded it and its
    # transcript held still through it (0: only ``end_silence_ms`` ends an utterance).
    stable_end_ms: int = 250


@dataclass(frozen=True)
class PushToTalkConfig:
    """The push-to-talk button: none, a terminal key (toggles), or a GPIO line's value file."""

    source: ButtonKind = "none"
    key: str = " "
    value_path: Path | None = None
    active_low: bool = True
    poll_ms: int = 10


@dataclass(frozen=True)
class WakeConfig:
    """The wake word (mode ``wake``): which model, and how long the board listens after it.

    ``model`` is one of the microWakeWord models in the ``pymicro-wakeword`` wheel;
    ``cutoff`` overrides the cutoff tuned on the wake suite (``edge.wake.TUNED_CUTOFFS``).
    After the wake word the board waits ``listen_s`` for speech to begin; after it
    speaks an answer it listens ``follow_up_s`` without the wake word (``question_s``
    when the answer ends in a question).
    """

    model: WakeModel = "okay_nabu"
    cutoff: float | None = None
    listen_s: float = 4.0
    follow_up_s: float = 5.0
    question_s: float = 10.0
    chime: bool = True


@dataclass(frozen=True)
class EndpointingConfig:
    """How utterances are cut: by voice activity, by the button, both, or after a wake word."""

    mode: EndpointMode = "vad"
    vad: VadConfig = field(default_factory=VadConfig)
    push_to_talk: PushToTalkConfig = field(default_factory=PushToTalkConfig)
    wake: WakeConfig = field(default_factory=WakeConfig)


@dataclass(frozen=True)
class AsrConfig:
    """The Vosk model (path or ``package:NAME``) and an optional phrase grammar."""

    model: str = DEFAULT_VOSK_MODEL
    grammar: tuple[str, ...] | None = None
    partials: bool = True


@dataclass(frozen=True)
class TtsConfig:
    """The Piper voice (``.onnx`` path or ``package:NAME``) and its speaking rate."""

    voice: str = DEFAULT_PIPER_VOICE
    length_scale: float | None = None
    # Synthesize a long first sentence's first clause (split at , ; : after at least this
    # many words) on its own, so playback starts sooner (0: whole sentences only).
    first_clause_words: int = 4
    # Piper's onnxruntime threads (0: onnxruntime's own choice, every core). Fewer when
    # the board shares its cores with home's model server (hil's virtual board).
    threads: int = 0


@dataclass(frozen=True)
class EchoGateConfig:
    """How long after playback ends the microphone stays shut (room echo)."""

    tail_ms: int = 300


@dataclass(frozen=True)
class NoticeConfig:
    """What the board says, locally: ``text`` when a turn is made while home is
    unreachable, ``failure_text`` when home reports a turn of this board failed or aborted."""

    text: str = DEFAULT_NOTICE
    failure_text: str = DEFAULT_FAILURE_NOTICE


@dataclass(frozen=True)
class BridgeConfig:
    """The edge bridge half and where its keys live; no half means a local-only edge.

    ``outbox``: the folder of the bridge's durable outbox (default ``outbox/`` beside the
    half); it must be writable by the edge, which the half's folder on a board is not.
    """

    half: Path | None = None
    secrets: Path | None = None
    outbox: Path | None = None


@dataclass(frozen=True)
class NatsConfig:
    """The loopback nats-server of the edge; port 0 picks a free one."""

    host: str = "127.0.0.1"
    port: int = 0


@dataclass(frozen=True)
class RunConfig:
    """How long a file-driven run waits for home's answers after the input ends."""

    answer_timeout_s: float = 30.0


@dataclass(frozen=True)
class EdgeConfig:
    """The whole of ``edge.yaml``."""

    device: str = "board"
    nats: NatsConfig = field(default_factory=NatsConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    endpointing: EndpointingConfig = field(default_factory=EndpointingConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    tts: TtsConfig = field(default_factory=TtsConfig)
    echo_gate: EchoGateConfig = field(default_factory=EchoGateConfig)
    notice: NoticeConfig = field(default_factory=NoticeConfig)
    bridge: BridgeConfig = field(default_factory=BridgeConfig)
    run: RunConfig = field(default_factory=RunConfig)
