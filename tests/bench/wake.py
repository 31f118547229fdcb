"""Wake word benchmark: what listening for a wake word costs the board, and how well it hears.

Figures and their peers (measured in the same run):
- RSS and CPU of ``edge run`` listening on a real-time PulseAudio null sink with
  ``endpointing.mode: wake`` against ``vad`` (goal: the wake word adds at most 30 MiB
  and 5 % of one core), and the wake word model alone per 100 ms frame;
- each model of the ``pymicro-wakeword`` wheel on the wake suite's corpus
  (``hil/wake.py``): false rejects per 100 wake words and false accepts per hour of
  background, tuning and held-out halves. ``WAKE_HOURS`` sets the background per
  half (default 1).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from edge.audio.null_server import pulse_daemon
from edge.wake import WAKE_MODELS, WakeWord
from hil.wake import HALVES, build_corpus, score
from tests.bench.edge import PHRASES, measure_process
from tests.bench.report import Result, publish

DEVICE_AUDIO = (
    "audio: {input: {kind: sounddevice, device: pulse}, "
    "output: {kind: sounddevice, device: pulse}}\n"
)


def listening_cost(tmp: Path) -> list[Result]:
    grammar = json.dumps(list(PHRASES), ensure_ascii=False)
    base = DEVICE_AUDIO + f"asr: {{grammar: {grammar}}}\n"
    with pulse_daemon(tmp / "pulse") as pulse:
        vad = measure_process(base + "endpointing: {mode: vad}\n", tmp, "vad", pulse.env)
        wake = measure_process(base + "endpointing: {mode: wake}\n", tmp, "wake", pulse.env)
    wake_word = WakeWord()
    frame = (np.random.default_rng(1).standard_normal(1600) * 300).astype("<i2").tobytes()
    began = time.perf_counter()
    for _ in range(600):
        wake_word.feed(frame)
    per_frame_ms = (time.perf_counter() - began) / 600 * 1000
    return [
        Result(
            "edge RSS listening, mode wake",
            wake["rss_mb"],
            "MiB",
            1,
            "mode vad",
            vad["rss_mb"],
            f"adds {wake['rss_mb'] - vad['rss_mb']:.1f} MiB; goal <= 30",
        ),
        Result(
            "edge CPU listening, mode wake",
            wake["cpu_pct"],
            "% of one core",
            1,
            "mode vad",
            vad["cpu_pct"],
            f"adds {wake['cpu_pct'] - vad['cpu_pct']:.2f} % of one core; goal <= 5",
        ),
        Result(
            "wake word model per 100 ms frame",
            per_frame_ms,
            "ms",
            600,
            note=f"{per_frame_ms / 100 * 100:.2f} % of one core at 16 kHz",
        ),
    ]


def hearing(hours: float) -> list[Result]:
    corpus = build_corpus(hours)
    results = []
    for model in WAKE_MODELS:
        for half in HALVES:
            s = score(model, corpus, half)
            results.append(
                Result(
                    f"{model} false rejects, {half}",
                    s.false_reject_percent,
                    "per 100",
                    s.wake_words,
                    "false accepts per hour",
                    s.false_accepts_per_hour,
                    f"{s.background_hours:.2f} h of background; near misses "
                    f"{s.near_miss_accepts}/{s.near_misses}; rejects by condition "
                    f"{dict(sorted(s.rejects_by.items()))}",
                )
            )
    return results


def main() -> None:
    """Run every figure and write bench-results/wake.json."""
    with tempfile.TemporaryDirectory(prefix="bench-wake-") as folder:
        results = listening_cost(Path(folder))
    results += hearing(float(os.environ.get("WAKE_HOURS", "1")))
    publish("wake", results)
