"""The durable outbox's rows of ``make bench NAME=bridge``: its cost, and what a kill -9 loses.

Latency: the same two processes as ``ours`` in :mod:`tests.bench.bridge`, with the
outbox in memory, in SQLite WAL with ``synchronous=NORMAL`` (the default) and with
``FULL``, interleaved round by round against bare NATS. Crash: the chaos test's
scenario (:mod:`tests.bridge.crash`), its board asking the edge to take each event as the
shipped producers do (`edge/handover.py`), once with the outbox in memory, once durable.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import nats

from shared.proc import free_port, wait_for_port_blocking
from tests.bench.bridge import LATENCY_ROUNDS, LATENCY_SECONDS, Path_, latency, process
from tests.bench.report import Result, quantile
from tests.bridge.crash import CrashReport, run_crash
from tests.bridge.servers import Paired, nats_server

MODES = ("memory", "NORMAL", "FULL")


@contextlib.asynccontextmanager
async def ours_with(paired: Paired, outbox: Path | None, sync: str) -> AsyncIterator[Path_]:
    """Edge NATS -> edge process -> SSH -> home process -> home NATS; durable if ``outbox``."""
    port = free_port()
    r = paired.result
    extra = (str(outbox), sync) if outbox is not None else ()
    with (
        nats_server() as edge_url,
        nats_server() as home_url,
        process("home", str(r.home_half), str(r.host_key), home_url, str(port), *extra) as home,
    ):
        wait_for_port_blocking("127.0.0.1", port, timeout_s=30, exit_code=home.poll)
        with process("edge", str(r.edge_half), str(r.client_key), edge_url, str(port), *extra):
            pub, sub = await nats.connect(edge_url), await nats.connect(home_url)
            try:
                name = "outbox in memory" if outbox is None else f"SQLite WAL {sync}"
                yield Path_(name, pub, sub)
            finally:
                await pub.close()
                await sub.close()


async def cost_rows(paired: Paired, tmp: Path, bare: Path_) -> list[Result]:
    """Added p50/p99 at 100 and 1000 ev/s: durable (NORMAL, FULL) vs in memory."""
    results: list[Result] = []
    async with (
        ours_with(paired, None, "NORMAL") as memory,
        ours_with(paired, tmp / "normal", "NORMAL") as normal,
        ours_with(paired, tmp / "full", "FULL") as full,
    ):
        paths = (bare, memory, normal, full)
        for rate in (100, 1000):
            samples: dict[str, list[float]] = {p.name: [] for p in paths}
            for _ in range(LATENCY_ROUNDS):
                for path in paths:
                    samples[path.name] += await latency(path, rate)
            b, m, n, f = (samples[p.name] for p in paths)
            expected = int(rate * LATENCY_SECONDS) * LATENCY_ROUNDS
            for q, label in ((0.5, "p50"), (0.99, "p99")):
                base = quantile(b, q)
                added = {name: quantile(s, q) - base for name, s in (("m", m), ("n", n), ("f", f))}
                results.append(
                    Result(
                        f"added latency {label} @ {rate} ev/s, durable outbox (WAL NORMAL)",
                        added["n"],
                        "ms",
                        len(n),
                        "the same bridge, outbox in memory",
                        added["m"],
                        f"WAL FULL {added['f']:.3f} ms; bare NATS {label} {base:.3f} ms "
                        f"(lost: memory {expected - len(m)}, NORMAL {expected - len(n)}, "
                        f"FULL {expected - len(f)})",
                    )
                )
    return results


async def crash_rows(paired: Paired, tmp: Path) -> list[Result]:
    """Events lost (and duplicated) across kill -9 of the edge half, then of the home half."""
    memory = await run_crash(paired, tmp / "crash-memory", durable=False)
    durable = await run_crash(paired, tmp / "crash-durable", durable=True)

    def lost(r: CrashReport) -> int:
        return len(set(r.published) - set(r.arrivals))

    return [
        Result(
            "events lost across kill -9 of the edge half (durable outbox)",
            len(durable.lost_edge_kill),
            "events",
            len(durable.taken_at_kill),
            "the same bridge, outbox in memory",
            len(memory.lost_edge_kill) + len(memory.lost_at_intake),
            f"n: events in the killed edge's outbox file, each delivered once after the "
            f"restart; still on the board's bus when it died, asked again until taken "
            f"(edge/handover.py) and lost: {len(durable.lost_at_intake)}; in memory the "
            f"edge is killed once home delivered the first of the burst (no file to watch)",
        ),
        Result(
            "events lost across kill -9 of each half (durable outbox)",
            lost(durable),
            "events",
            len(durable.published),
            "the same bridge, outbox in memory",
            lost(memory),
            f"each event a request the edge answers once it is in the outbox, asked again "
            f"until taken (edge/handover.py); delivered twice: {len(durable.duplicates)}",
        ),
        Result(
            "events lost across kill -9 of the home half (durable outbox)",
            len(durable.lost_home_kill),
            "events",
            len(durable.published) - durable.before_edge_kill,
            "the same bridge, outbox in memory",
            len(memory.lost_home_kill),
            f"delivered twice over the run: durable {len(durable.duplicates)}, "
            f"in memory {len(memory.duplicates)}",
        ),
    ]


async def durable_rows(paired: Paired, tmp: Path) -> list[Result]:
    """Every row of the durable outbox, bare NATS as the latency baseline."""
    with nats_server() as url:
        pub, sub = await nats.connect(url), await nats.connect(url)
        try:
            results = await cost_rows(paired, tmp, Path_("bare NATS", pub, sub))
        finally:
            await pub.close()
            await sub.close()
    return results + await crash_rows(paired, tmp)
