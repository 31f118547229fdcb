"""Wake word benchmark: what listening for a wake word costs the board, and how well it hears.

Figures and their peers (measured in the same run):
- RSS and CPU of ``edge run`` listening on a real-time PulseAudio null sink with
  ``endpointing.mode: wake`` against ``vad`` (goal: the wake word adds at most 30 MiB
  and 5 % of one core), and the wake word model alone per 100 ms frame;
- each model of the ``pymicro-wakeword`` wheel on the wake suite's corpus
  (``hil/wake.py``): false rejects per 100 wake words and false accepts per hour of
  background at the board's tuned cutoff, against the model's own cutoff, tuning and
  held-out halves. ``WAKE_HOURS`` sets the background per
  half (default 1).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import tempfile
import time
from pathlib import Path

import numpy as np

from edge.audio.null_server import pulse_daemon
from edge.wake import TUNED_CUTOFFS, WAKE_MODELS, WakeWord
from hil.targets.profile import load_profile
from hil.targets.qemu import QemuBoard
from hil.targets.ssh import SshBoardOptions
from hil.targets.sshlink import HostKeyPin
from hil.wake import HALVES, build_corpus, score
from tests.bench.edge import PHRASES, measure_process
from tests.bench.report import Result, publish
from tests.support.board_image import build_qemu_image

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
        *_wake_against_vad("edge", wake, vad, "one core"),
        Result(
            "wake word model per 100 ms frame",
            per_frame_ms,
            "ms",
            600,
            note=f"{per_frame_ms / 100 * 100:.2f} % of one core at 16 kHz",
        ),
    ]


# --- on the emulated image -----------------------------------------------------------

# Run as root on the booted image, once per mode: the image's own edge config with only the
# endpointing mode and the spool folders changed, started by systemd as the service user and
# measured once it is ready (READY=1) and has settled.
_BOARD_MEASURE = """
set -e
cfg=/tmp/bench-{mode}.yaml
spool=/tmp/bench-{mode}
mkdir -p $spool/in $spool/out && chown -R tether $spool
{{ echo "device: bench-{mode}"
  grep -E '^(asr|tts):' /etc/tether/edge.yaml || true
  echo "audio: {{input: {{kind: spool, dir: $spool/in}}, output: {{kind: spool, dir: $spool/out}}}}"
  echo "endpointing: {{mode: {mode}}}"; }} > $cfg
systemd-run -q --unit bench-{mode} -p Type=notify -p NotifyAccess=main -p KillMode=mixed \\
  -p User=tether -p TimeoutStartSec={ready_s} /opt/tether/venv/bin/edge run -c $cfg ||
  {{ journalctl -u bench-{mode} -o cat --no-pager | tail -30 >&2; exit 1; }}
pid=$(systemctl show -p MainPID --value bench-{mode})
sleep {settle_s}
a=$(awk '{{print $14+$15}}' /proc/$pid/stat); sleep {idle_s}
b=$(awk '{{print $14+$15}}' /proc/$pid/stat)
echo "rss_kb $(awk '/^VmRSS:/{{print $2}}' /proc/$pid/status)"
echo "ticks $((b - a)) $(getconf CLK_TCK)"
systemctl stop bench-{mode}
"""
IMAGE_IDLE_S = 60
IMAGE_READY_S = 900  # loading Vosk and Piper under TCG


async def _image_cost(work: Path) -> dict[str, dict[str, float]]:
    image = await asyncio.to_thread(build_qemu_image, work / "image")
    options = SshBoardOptions(key=None, pin=HostKeyPin(), profile=load_profile())
    figures: dict[str, dict[str, float]] = {}
    async with QemuBoard(image.image, work / "run", options) as board:
        if board.unreachable:
            raise RuntimeError(f"the emulated board: {board.unreachable}")
        await board.link.check("systemctl stop tether-edge.service", timeout_s=120)
        for mode in ("vad", "wake"):
            script = _BOARD_MEASURE.format(
                mode=mode, ready_s=IMAGE_READY_S, settle_s=10, idle_s=IMAGE_IDLE_S
            )
            out = await board.link.check(
                f"sh -c {shlex.quote(script)}", timeout_s=IMAGE_READY_S + IMAGE_IDLE_S + 60
            )
            got = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
            ticks, hz = (float(f) for f in got["ticks"].split())
            figures[mode] = {
                "rss_mb": float(got["rss_kb"]) / 1024,
                "cpu_pct": 100 * ticks / hz / IMAGE_IDLE_S,
            }
    return figures


def image_cost(tmp: Path) -> list[Result]:
    """Both modes' edge on one boot of the qemu image (aarch64 under TCG): RSS and idle CPU."""
    figures = asyncio.run(_image_cost(tmp))
    return _wake_against_vad(
        "emulated image: edge", figures["wake"], figures["vad"], "one emulated core"
    )


def _wake_against_vad(
    what: str, wake: dict[str, float], vad: dict[str, float], core: str
) -> list[Result]:
    """RSS and CPU of ``what`` listening in mode wake, against mode vad (the goals' peers)."""
    return [
        Result(
            f"{what} RSS listening, mode wake",
            wake["rss_mb"],
            "MiB",
            1,
            "mode vad",
            vad["rss_mb"],
            f"adds {wake['rss_mb'] - vad['rss_mb']:.1f} MiB; goal <= 30",
        ),
        Result(
            f"{what} CPU listening, mode wake",
            wake["cpu_pct"],
            f"% of {core}",
            1,
            "mode vad",
            vad["cpu_pct"],
            f"adds {wake['cpu_pct'] - vad['cpu_pct']:.2f} % of {core}; goal <= 5",
        ),
    ]


def hearing(hours: float) -> list[Result]:
    corpus = build_corpus(hours)
    results = []
    for model in WAKE_MODELS:
        own = WakeWord(model).own_cutoff
        for half in HALVES:
            tuned, peer = score(model, corpus, half), score(model, corpus, half, own)
            detail = (
                f"cutoff {TUNED_CUTOFFS[model]:g} (model's own {own:g}); "
                f"{tuned.background_hours:.2f} h of background"
            )
            results += [
                Result(
                    f"{model} false rejects, {half}",
                    tuned.false_reject_percent,
                    "per 100",
                    tuned.wake_words,
                    "model's own cutoff",
                    peer.false_reject_percent,
                    f"{detail}; rejects by condition {dict(sorted(tuned.rejects_by.items()))}",
                ),
                Result(
                    f"{model} false accepts, {half}",
                    tuned.false_accepts_per_hour,
                    "per hour",
                    tuned.false_accepts,
                    "model's own cutoff",
                    peer.false_accepts_per_hour,
                    f"{detail}; near misses {tuned.near_miss_accepts}/{tuned.near_misses} "
                    f"(own cutoff {peer.near_miss_accepts}); other models' wake words "
                    f"{tuned.other_accepts}/{tuned.other_wake_words} "
                    f"(own cutoff {peer.other_accepts})",
                ),
            ]
    return results


def main() -> None:
    """Run every figure and write bench-results/wake.json."""
    with tempfile.TemporaryDirectory(prefix="bench-wake-") as folder:
        results = listening_cost(Path(folder))
        if os.environ.get("WAKE_BENCH_IMAGE", "1") != "0":
            results += image_cost(Path(folder))
    results += hearing(float(os.environ.get("WAKE_HOURS", "1")))
    publish("wake", results)
