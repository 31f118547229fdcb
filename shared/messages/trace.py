"""Marks: monotonic instants a turn collects on its way, for the wait it makes a person sit.

A turn's wait runs from the last voiced audio frame to the first played audio frame
(docs/architecture.md "One voice turn"). The board stamps what it sees in the turn
(``voice_end``, ``endpoint``, ``asr_final``) and in the speech ack (``speak_received``,
``tts_first_chunk``, ``first_audio``); home's stages are read from when their events
arrive. Every instant is ``time.monotonic()`` seconds on the clock named ``clock``:
instants on two clocks (a board and home on two machines) are never subtracted.

The payload key is ``trace``, optional on every message that carries it, so payloads
from before it still parse::

    "trace": {"clock": "<boot id>", "marks": {"voice_end": 812.214, "endpoint": 812.52}}
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from shared.errors import EnvelopeError
from shared.messages import fields

TRACE_KEY = "trace"

# The board's marks, in the order a turn passes them.
VOICE_END = "voice_end"  # the last frame the endpointer heard voice in
ENDPOINT = "endpoint"  # the endpointer closed the utterance
ASR_FINAL = "asr_final"  # the recognizer's final transcript is out
SPEAK_RECEIVED = "speak_received"  # the speaker node took the speak event
TTS_FIRST_CHUNK = "tts_first_chunk"  # Piper finished the first sentence
FIRST_AUDIO = "first_audio"  # the first chunk reached the sound device

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@cache
def monotonic_clock() -> str:
    """This machine's monotonic clock: its boot id (the clock restarts at boot), else the host."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return socket.gethostname()


@dataclass(frozen=True)
class Marks:
    """Named monotonic instants (seconds) on one clock."""

    clock: str = field(default_factory=monotonic_clock)
    at: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As the ``trace`` object of a payload."""
        return {"clock": self.clock, "marks": {k: round(v, 6) for k, v in self.at.items()}}

    def span_ms(self, first: str, last: str) -> float | None:
        """Milliseconds from mark ``first`` to ``last``; None when either is missing."""
        if first not in self.at or last not in self.at:
            return None
        return (self.at[last] - self.at[first]) * 1000

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Marks | None:
        """The payload's ``trace``, or None without one; ``EnvelopeError`` names a bad key."""
        trace = fields.opt_object(payload, TRACE_KEY)
        if trace is None:
            return None
        clock = trace.get("clock")
        if not isinstance(clock, str) or not clock:
            raise EnvelopeError(
                fields.payload_key(f"{TRACE_KEY}.clock"), f"must be a string, got {clock!r:.60}"
            )
        marks = trace.get("marks", {})
        if not isinstance(marks, dict):
            raise EnvelopeError(
                fields.payload_key(f"{TRACE_KEY}.marks"), f"must be an object, got {marks!r:.60}"
            )
        at: dict[str, float] = {}
        for name in marks:
            path = fields.payload_key(f"{TRACE_KEY}.marks.{name}")
            value = fields.opt_number(marks, name, path=path)
            if value is None or not math.isfinite(value):
                raise EnvelopeError(path, f"must be a finite number, got {marks[name]!r:.60}")
            at[str(name)] = value
        return cls(clock, at)
