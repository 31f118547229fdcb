"""Turn latency with the substrate on one home against a three-member cluster.

Two setups run side by side, each a real ``home up`` (scripted model, one τ
agent answering ``events.sensation.*.turn`` with a speak): a home alone, and a
home of three members on loopback (docs/architecture.md "Growing past one
machine") whose agent and router run on m3 while the turns are published on
m1's bus, so every turn crosses the routes and lands in the event log
replicated on three servers. Turns go one at a time, alternating between the
two setups so a noisy moment on this shared machine hits both; a turn's
latency is from publishing the sensation to receiving the agent's speak.
Goal: the cluster adds at most 2 ms p50. ``BENCH_CLUSTER_TURNS`` turns each (200: at
60 the p50 moved by several ms between runs). Both run with their memory servers
(the agent's conversation is written to memory each turn, replicated in the
cluster); then the memory rows of :mod:`tests.bench.cluster_memory`.

    make bench NAME=cluster
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import nats
from nats.aio.client import Client as NatsClient

from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speak_subject, speech_completed_subject
from tests.bench.cluster_memory import catch_up, writes_and_searches
from tests.bench.report import Result, publish, quantile
from tests.support.home_cluster import (
    Member,
    home_cluster,
    start_member,
    wait_for,
    write_turns_schema,
)
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

TURNS = int(os.environ.get("BENCH_CLUSTER_TURNS", "200"))
WARMUP = 5
GOAL_ADDED_P50_MS = 2.0
DEVICE = "bench"
TIMEOUT_S = 60.0  # a turn on this loaded 2-core machine can stall for seconds


def answer(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "ok"})


async def one_turn(nc: NatsClient, sequence: int) -> float:
    """Milliseconds from the sensation to the agent's speak; the speak is acked as a board does."""
    speaks = await nc.subscribe(speak_subject("edge_asr", DEVICE))
    try:
        await nc.flush()
        turn = Event.new(
            "sensation.turn", {"text": f"turn {sequence}", "device": DEVICE},
            source=f"edge.audio.{DEVICE}", sequence_number=sequence, binding_id=new_binding_id(),
        )  # fmt: skip
        started = time.perf_counter()
        await nc.publish(sensation_turn_subject(DEVICE), turn.to_json())
        while True:
            msg = await speaks.next_msg(timeout=TIMEOUT_S)
            speak = Event.from_json(msg.data)
            if speak.binding_id == turn.binding_id:
                break
        elapsed = (time.perf_counter() - started) * 1000
        ack = Event.new(
            "speech.completed", {"ok": True, "device": DEVICE}, source=f"edge.audio.{DEVICE}",
            sequence_number=sequence, binding_id=speak.binding_id,
        )  # fmt: skip
        await nc.publish(speech_completed_subject(turn.binding_id or ""), ack.to_json())
        await nc.flush()
        return elapsed
    finally:
        await speaks.unsubscribe()


async def run(root: Path) -> list[Result]:
    schemas = write_turns_schema(root / "schemas")
    args = ["--schema-dir", str(schemas)]
    async with AsyncExitStack() as stack:
        model = await stack.enter_async_context(ScriptedModel(responder=answer))
        members = await stack.enter_async_context(
            home_cluster(root / "cluster", model.url, {"m3": ["cluster_turns"]}, args, memory=True)
        )
        alone = Member("alone", root / "alone" / "home", 0)
        await start_member(alone, model.url, [], [*args, "--apply", "cluster_turns"], memory=True)

        async def stop_alone() -> None:
            if alone.proc is not None and alone.proc.returncode is None:
                alone.proc.terminate()
                await alone.proc.wait()

        stack.push_async_callback(stop_alone)
        await wait_for([alone], alive=0)
        one = await nats.connect(alone.admin_url())
        stack.push_async_callback(one.close)
        spread = await nats.connect(members[0].admin_url())
        stack.push_async_callback(spread.close)
        times: dict[str, list[float]] = {"alone": [], "cluster": []}
        for i in range(WARMUP + TURNS):
            order = [("alone", one), ("cluster", spread)]
            for name, nc in order if i % 2 == 0 else order[::-1]:
                elapsed = await one_turn(nc, i + 1)
                if i >= WARMUP:
                    times[name].append(elapsed)
        memory = await writes_and_searches(members, alone)
        memory += await catch_up(members[0])
    results = []
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        alone_ms, cluster_ms = quantile(times["alone"], q), quantile(times["cluster"], q)
        results.append(
            Result(
                f"turn latency {label}, three-member cluster (agent on another member)",
                round(cluster_ms, 2),
                "ms",
                TURNS,
                peer="home alone",
                peer_value=round(alone_ms, 2),
                note=f"added {cluster_ms - alone_ms:+.2f} ms"
                + (f"; goal <= {GOAL_ADDED_P50_MS} ms" if q == 0.5 else ""),
            )
        )
    return results + memory


def main() -> None:
    """Run the benchmark; print the table and write bench-results/cluster.json."""
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as root:
        results = asyncio.run(run(Path(root)))
    path = publish("cluster", results)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
