"""Endpointing: where an utterance starts and ends, by voice activity or a push-to-talk button."""

from __future__ import annotations

from edge.endpoint.buttons import (
    Button,
    ButtonEvent,
    GpioValueButton,
    ManualButton,
    TerminalKeyButton,
)
from edge.endpoint.segmenter import (
    Endpointer,
    SegmentEvent,
    UtteranceAudio,
    UtteranceEnd,
    UtteranceStart,
    frame_level_db,
)

__all__ = [
    "Button",
    "ButtonEvent",
    "Endpointer",
    "GpioValueButton",
    "ManualButton",
    "SegmentEvent",
    "TerminalKeyButton",
    "UtteranceAudio",
    "UtteranceEnd",
    "UtteranceStart",
    "frame_level_db",
]
