"""The wait a turn makes a person sit, end of speech to first audio, split by stage (pure).

Built from the board's marks (:mod:`shared.messages.trace`: in the turn and in the
speech ack) and from when home's events of the turn arrived at hil's watch. A span
between two instants on different monotonic clocks (a real board and home) is not
computed: the bridge stages are then left out, and the whole wait is still the
board's own ``first_audio - voice_end``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from shared.messages.trace import (
    ASR_FINAL,
    ENDPOINT,
    FIRST_AUDIO,
    SPEAK_RECEIVED,
    TTS_FIRST_CHUNK,
    VOICE_END,
    Marks,
)

# The stages, in the order a turn passes them (the report stacks them so).
STAGES = (
    "endpointing",  # last voiced frame -> endpointer closes the utterance
    "asr_final",  # -> the recognizer's final transcript
    "bridge_up",  # -> the turn on home's NATS (edge publish, bridge, SSH)
    "routing",  # -> the routed event on the agent's inbox subject
    "queue",  # -> the agent starts on it (inbox, τ prompt; with recall: until recall starts)
    "recall",  # the memory reflex's search (only with a recall report)
    "model",  # -> the speak event on home (the model's answer and the speak tool)
    "bridge_down",  # -> the board's speaker takes the speak event
    "tts_first_chunk",  # -> Piper's first sentence
    "audio_device",  # -> the first chunk reaches the sound device
)
TOTAL = "wait"


@dataclass(frozen=True)
class HomeArrivals:
    """When hil's watch saw each of the turn's events on home (monotonic, hil's clock)."""

    turn: float
    inbox: float | None
    speak: float
    recall: float | None = None
    recall_latency_ms: float | None = None


def turn_wait(
    turn: Marks | None, ack: Marks | None, home: HomeArrivals, local_clock: str
) -> dict[str, float]:
    """Milliseconds per stage (only those that can be computed) and ``wait`` in total."""
    out = _home_stages(home)
    marks = [m for m in (turn, ack) if m is not None]
    for m in marks:
        for stage, first, last in (
            ("endpointing", VOICE_END, ENDPOINT),
            ("asr_final", ENDPOINT, ASR_FINAL),
            ("tts_first_chunk", SPEAK_RECEIVED, TTS_FIRST_CHUNK),
            ("audio_device", TTS_FIRST_CHUNK, FIRST_AUDIO),
        ):
            span = m.span_ms(first, last)
            if span is not None:
                out[stage] = span
        if m.clock == local_clock:
            if ASR_FINAL in m.at:
                out["bridge_up"] = (home.turn - m.at[ASR_FINAL]) * 1000
            if SPEAK_RECEIVED in m.at:
                out["bridge_down"] = (m.at[SPEAK_RECEIVED] - home.speak) * 1000
    if turn is not None and ack is not None and turn.clock == ack.clock:
        total = Marks(turn.clock, {**turn.at, **ack.at}).span_ms(VOICE_END, FIRST_AUDIO)
        if total is not None:
            out[TOTAL] = total
    return {stage: out[stage] for stage in (*STAGES, TOTAL) if stage in out}


def _home_stages(home: HomeArrivals) -> dict[str, float]:
    out: dict[str, float] = {}
    if home.inbox is None:
        out["model"] = (home.speak - home.turn) * 1000
        return out
    out["routing"] = (home.inbox - home.turn) * 1000
    if home.recall is not None and home.recall_latency_ms is not None:
        out["queue"] = max(0.0, (home.recall - home.inbox) * 1000 - home.recall_latency_ms)
        out["recall"] = home.recall_latency_ms
        out["model"] = (home.speak - home.recall) * 1000
    else:
        # No recall report: the agent's queue is inside this span.
        out["model"] = (home.speak - home.inbox) * 1000
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def summarize(per_turn: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """p50, p95 and mean per stage (and ``wait``) over the turns that have it."""
    summary: dict[str, dict[str, float]] = {}
    for stage in (*STAGES, TOTAL):
        values = [turn[stage] for turn in per_turn if stage in turn]
        if values:
            summary[stage] = {
                "n": float(len(values)),
                "p50_ms": percentile(values, 50),
                "p95_ms": percentile(values, 95),
                "mean_ms": statistics.fmean(values),
            }
    return summary
