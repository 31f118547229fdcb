"""Many boards on one home: turns, latency, loss and home's cost per board as N grows.

One ``home up`` (schema ``edge_asr``, the scripted model: a test double answering
every turn with one ``speak``), and for each N a fleet of N boards
(``hil/fleet.py``): each a real edge bridge half over its own SSH connection to
home's endpoint, typing turns on its own device rails and acking every speak.
Every board first speaks one warm-up turn (at a random phase within
``BENCH_FLEET_INTERVAL_S``; a new board's first turn starts its conversation with
the agent, reported apart), and once all are answered ``BENCH_FLEET_TURNS`` turns,
one per ``BENCH_FLEET_INTERVAL_S`` seconds at a random phase. Reported per N:
turns answered and per second, turn → answer p50/p99 (measured turns and warm-up
turns apart), turns lost (no answer in ``BENCH_FLEET_TIMEOUT_S``) or answered
more than once, pairing and link-up time, home's RSS and CPU per board and its
open file descriptors (its process tree: nats-server, agent and effector nodes,
JMFTS, the endpoint).

Goal: at N = 100, p99 ≤ 3× the N = 1 figure (the peer in the table) and 0 lost.
The single board speaks ``BENCH_FLEET_SINGLE_TURNS`` measured turns (30), one per
``BENCH_FLEET_SINGLE_INTERVAL_S`` (2 s), so that its p99 is a percentile and not the
slower of two turns; one board at that pace offers a third of a turn per second,
less than N = 50 does.
``BENCH_FLEET_SIZES`` (comma-separated) picks the Ns; default 1,10,50,100.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hil.fleet import Fleet, FleetLoad, FleetReport
from shared.proc import terminate_blocking
from tests.bench.report import Result, publish
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

SIZES = tuple(int(n) for n in os.environ.get("BENCH_FLEET_SIZES", "1,10,50,100").split(","))
LOAD = FleetLoad(
    turns=int(os.environ.get("BENCH_FLEET_TURNS", "2")),
    interval_s=float(os.environ.get("BENCH_FLEET_INTERVAL_S", "60")),
    turn_timeout_s=float(os.environ.get("BENCH_FLEET_TIMEOUT_S", "60")),
)
SINGLE = FleetLoad(
    turns=int(os.environ.get("BENCH_FLEET_SINGLE_TURNS", "30")),
    interval_s=float(os.environ.get("BENCH_FLEET_SINGLE_INTERVAL_S", "2")),
    turn_timeout_s=LOAD.turn_timeout_s,
)
READY_TIMEOUT_S = 300


def speak(request: RecordedRequest) -> Reply:
    """One ``speak`` per turn, then silence once the tool's result is back."""
    if request.messages and request.messages[-1].get("role") == "tool":
        return Reply()
    return Reply.call("speak", {"text": "Heard you."})


def start_home(root: Path, llm_url: str) -> subprocess.Popen[bytes]:
    """``home up`` with ``edge_asr`` applied and the scripted model; returns once healthy."""
    data_dir = root / "home"
    log = (root / "home-up.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "home.cli", "up", "--data-dir", str(data_dir), "--bridge-port",
         "0", "--apply", "edge_asr", "--llm-url", llm_url],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not (data_dir / "home.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"home up did not start: {(root / 'home-up.log').read_text()}")
        time.sleep(0.2)
    ready = subprocess.run(
        [sys.executable, "-m", "home.cli", "status", "--wait", str(READY_TIMEOUT_S),
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if ready.returncode != 0:
        raise RuntimeError(f"home never became healthy: {ready.stdout}{ready.stderr}")
    return proc


def load_for(n: int) -> FleetLoad:
    """The single board's load, or every fleet's."""
    return SINGLE if n == 1 else LOAD


def rows(report: FleetReport, single: FleetReport | None) -> list[Result]:
    """The table's rows for one N, the N = 1 run as peer of its latencies."""
    n = report.boards
    peer = None if single is None or single is report else "N = 1"
    load = load_for(n)
    note = f"{report.sent} sent, 1 + {load.turns} per board every {load.interval_s:g} s"
    out = [
        Result(f"N={n} turns answered", report.answered, "turns", report.sent, note=note),
        Result(f"N={n} turns lost", report.lost, "turns", report.sent, note="goal 0"),
        Result(f"N={n} turns duplicated", report.duplicated, "turns", report.sent),
        Result(f"N={n} turns/s", report.turns_per_s, "turns/s", report.answered),
    ]
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        out.append(
            Result(
                f"N={n} turn → answer {label}",
                report.quantile_ms(q),
                "ms",
                len(report.latencies_ms),
                peer,
                None if peer is None or single is None else single.quantile_ms(q),
                "goal ratio ≤ 3 at N = 100" if label == "p99" and peer else "",
            )
        )
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        out.append(
            Result(
                f"N={n} warm-up turn → answer {label}",
                report.quantile_ms(q, first=True),
                "ms",
                len(report.first_latencies_ms),
                peer,
                None if peer is None or single is None else single.quantile_ms(q, first=True),
                "each board's first turn of the run; a new board's starts its conversation",
            )
        )
    out += [
        Result(f"N={n} pairing (all boards)", report.pair_s, "s", n),
        Result(f"N={n} links up (all boards)", report.link_s, "s", n),
        Result(f"N={n} home RSS per board", report.home_rss_mb / n, "MB", n,
               note=f"{report.home_rss_mb:.0f} MB in all"),
        Result(f"N={n} home CPU per board", report.home_cpu_s / n * 1000, "ms", n,
               note=f"{report.home_cpu_s:.1f} s in all over {report.wall_s:.0f} s"),
        Result(f"N={n} home open files", report.home_fds, "fds", n,
               note="its process tree, at the end of the turns"),
    ]  # fmt: skip
    return out


async def measure(root: Path) -> list[Result]:
    """Every N against one home, smallest first."""
    results: list[Result] = []
    async with ScriptedModel(responder=speak) as model:
        home = await asyncio.to_thread(start_home, root, model.url)
        try:
            single: FleetReport | None = None
            for n in SIZES:
                async with Fleet(root / "home", n) as fleet:
                    report = await fleet.run(load_for(n))
                single = report if single is None and n == 1 else single
                results += rows(report, single)
                print(
                    f"N={n}: {report.answered}/{report.sent} answered, "
                    f"p50 {report.quantile_ms(0.5):.0f} ms, p99 {report.quantile_ms(0.99):.0f} ms",
                    flush=True,
                )
        finally:
            await asyncio.to_thread(terminate_blocking, home, 30)
    return results


def main() -> None:
    """Run the benchmark, print the table, write bench-results/fleet.json."""
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        publish("fleet", asyncio.run(measure(Path(tmp))))
