"""Substrate overhead: sensation publish → delivery on ``events.workspace.<agent>.in``.

Runs a real ``home up`` (its own process: nats-server + substrate) with one
schema binding ``events.sensation.bench.turn`` to a service node, and measures
from this process the time from publishing a sensation to receiving the
routed event on the agent's inbound subject, at 100 and 1000 events/s. The
peer, in the same run, interleaved event by event and on the same
nats-server, is a bare NATS publish→subscribe on ``events.sensation.peer.turn``
(also recorded by the event log, but bound by no schema). Also measured: ``home up`` to ready
(state file written and ``home status`` healthy) against a bare nats-server
start.

    make bench NAME=substrate
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats
import yaml
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from home.substrate.nats_server import NatsServer
from shared.event import Event
from tests.bench.report import Result, publish

RATES = ((100, 600), (1000, 3000))  # events/s, events sent (split over the rounds)
ROUNDS = 3
WARMUP = 200
GOAL_ADDED_P99_MS = 2.0

CATALOG = {
    "catalog": "bench",
    "nodes": {
        "svc.bench": {
            "kind": "service",
            "runs_on": "home",
            "publishes": ["events.workspace.bench.out.>"],
            "subscribes": ["events.workspace.bench.in"],
            "config": {"command": [sys.executable, "-c", "import signal; signal.pause()"]},
        }
    },
}
SCHEMA = {
    "schema": "bench",
    "requires": {"nodes": ["svc.bench"]},
    "bindings": [{"from": "events.sensation.bench.turn", "to": "svc.bench"}],
}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


Path_ = tuple[str, str]  # (publish on, receive on)


async def measure(
    nc: NatsClient, paths: tuple[Path_, ...], rate: int, count: int
) -> list[list[float]]:
    """Latencies (ms) along each path, ``count`` events each at ``rate``/s.

    The paths are measured interleaved, one event on each per tick, so that a
    noisy moment on this shared machine hits the routed path and its bare
    peer alike.
    """
    sent: dict[str, int] = {}
    latencies: list[list[float]] = [[] for _ in paths]
    done = asyncio.Event()

    def receiver(index: int) -> Callable[[Msg], Awaitable[None]]:
        async def on_message(msg: Msg) -> None:
            now = time.perf_counter_ns()
            started = sent.pop(Event.from_json(msg.data).event_id, None)
            if started is not None:
                latencies[index].append((now - started) / 1e6)
                if sum(map(len, latencies)) == count * len(paths):
                    done.set()

        return on_message

    subs = [
        await nc.subscribe(receive_on, cb=receiver(i)) for i, (_, receive_on) in enumerate(paths)
    ]
    await nc.flush()
    interval = 1.0 / rate
    begin = time.perf_counter()
    for i in range(count):
        delay = begin + i * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        # Alternate which path goes first, so neither always waits behind the other.
        order = paths if i % 2 == 0 else paths[::-1]
        for send_on, _ in order:
            event = Event.new(
                "sensation.turn", {"text": f"utterance {i}"}, source="bench", sequence_number=i
            )
            sent[event.event_id] = time.perf_counter_ns()
            await nc.publish(send_on, event.to_json())
    try:
        await asyncio.wait_for(done.wait(), 30)
    except TimeoutError:
        print(f"warning: {len(sent)} events were not received")
    for sub in subs:
        await sub.unsubscribe()
    return latencies


def start_home(root: Path) -> tuple[subprocess.Popen[bytes], float]:
    """Start `home up`; return it and the seconds until `home status --json` said healthy."""
    catalog = root / "nodes.yaml"
    catalog.write_text(yaml.safe_dump(CATALOG))
    schema_dir = root / "activation"
    schema_dir.mkdir()
    (schema_dir / "bench.yaml").write_text(yaml.safe_dump(SCHEMA))
    data_dir = root / "data"
    began = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "home.cli",
            "up",
            "--json",
            "--data-dir",
            str(data_dir),
            "--catalog",
            str(catalog),
            "--schema-dir",
            str(schema_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(root / "home-up.log").open("wb"),
    )
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"home up exited: {(root / 'home-up.log').read_text()}")
        if (data_dir / "home.json").exists():
            status = subprocess.run(
                [sys.executable, "-m", "home.cli", "status", "--json", "--data-dir", str(data_dir)],
                capture_output=True,
                text=True,
                check=False,
            )
            if status.returncode == 0:
                components = json.loads(status.stdout)["components"]
                if all(c["state"] == "healthy" for c in components):
                    return proc, time.perf_counter() - began
        time.sleep(0.02)


async def bare_nats_start(root: Path) -> float:
    """Seconds for a bare nats-server (JetStream on) to accept a client."""
    server = NatsServer(root / "bare-nats")
    began = time.perf_counter()
    await server.start()
    elapsed = time.perf_counter() - began
    await server.stop()
    return elapsed


def apply_schema(data_dir: Path) -> None:
    """`home schema apply bench` through the CLI."""
    applied = subprocess.run(
        [sys.executable, "-m", "home.cli", "schema", "apply", "bench", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    if applied.returncode != 0:
        raise RuntimeError(applied.stderr)


async def latencies(nats_url: str) -> list[Result]:
    """Routed against bare latency at each rate."""
    nc = await nats.connect(nats_url)
    results: list[Result] = []
    routed_path = ("events.sensation.bench.turn", "events.workspace.bench.in")
    bare_path = ("events.sensation.peer.turn", "events.sensation.peer.turn")
    try:
        await measure(nc, (routed_path, bare_path), 500, WARMUP)
        for rate, count in RATES:
            rounds = [
                await measure(nc, (routed_path, bare_path), rate, count // ROUNDS)
                for _ in range(ROUNDS)
            ]
            routed = [x for r, _ in rounds for x in r]
            bare = [x for _, b in rounds for x in b]
            for q in (50, 99):
                results.append(
                    Result(
                        f"sensation → workspace.in p{q} @ {rate}/s",
                        percentile(routed, q),
                        "ms",
                        len(routed),
                        "bare NATS pub→sub",
                        percentile(bare, q),
                    )
                )
            # Per round, so one noisy burst from a neighbour on this shared machine
            # does not decide the figure alone; the pooled p99s are in the rows above.
            added_by_round = [percentile(r, 99) - percentile(b, 99) for r, b in rounds]
            added = statistics.median(added_by_round)
            verdict = "met" if added <= GOAL_ADDED_P99_MS else "NOT met"
            results.append(
                Result(
                    f"added p99 by routing @ {rate}/s (median of {ROUNDS} rounds)",
                    added,
                    "ms",
                    len(routed),
                    note=(
                        f"goal ≤ {GOAL_ADDED_P99_MS:g} ms: {verdict}; rounds "
                        + ", ".join(f"{x:.2f}" for x in added_by_round)
                    ),
                )
            )
    finally:
        await nc.close()
    return results


def run(root: Path) -> list[Result]:
    """Every figure of this benchmark."""
    bare_start = asyncio.run(bare_nats_start(root))
    proc, up_s = start_home(root)
    try:
        data_dir = root / "data"
        apply_schema(data_dir)
        state = json.loads((data_dir / "home.json").read_text())
        started = Result(
            "home up → healthy",
            up_s * 1000,
            "ms",
            1,
            "bare nats-server start",
            bare_start * 1000,
            "includes the CLI's Python start; acceptance: < 5000 ms",
        )
        return [started, *asyncio.run(latencies(state["nats_url"]))]
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    """Run, print the table, write bench-results/substrate.json."""
    with tempfile.TemporaryDirectory(prefix="bench-substrate-") as tmp:
        results = run(Path(tmp))
    path = publish("substrate", results)
    print(f"wrote {path}")
