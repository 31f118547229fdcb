"""Bridge benchmark: our SSH bridge vs bare NATS vs a NATS leaf node over an SSH forward.

Each side runs in its own process, as on two machines: the edge bridge node, the
home endpoint, and for the peer an SSH server + client doing a local forward that
carries a leaf node connection (leaf nats-server on the "board", hub at "home").
The benchmark process publishes on the edge side and subscribes on the home side.

The leaf peer comes in two forms: core NATS (what the leaf connection alone carries,
at most once), and leaf node plus JetStream (the board stores events in a stream,
home's stream sources it across the leaf connection, both deduplicating by
``Nats-Msg-Id``): the best the engine offers across an outage.

Figures: added latency (p50/p99) at 100 and 1000 events/s; throughput ceiling;
TCP bytes per voice turn vs the 16 kHz 16-bit PCM a streaming satellite would
send; events lost across one 10 s outage, each against both leaf forms; the durable
outbox's cost and what a kill -9 of each half loses (:mod:`tests.bench.bridge_durable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import ExternalStream, StreamConfig, StreamSource
from rich.console import Console
from rich.progress import Progress

from shared.event import Event
from shared.proc import free_port, terminate_blocking, wait_for_port, wait_for_port_blocking
from tests.bench.report import Result, publish, quantile
from tests.bridge.faulty_proxy import FaultyProxy
from tests.bridge.servers import Paired, make_pair, nats_server

UP = "events.sensation.board.turn"
LEAF = "NATS leaf node over SSH"
LEAF_JS = "NATS leaf node + JetStream over SSH"
BOARD_STREAM, HOME_STREAM = "BOARD_UP", "HOME_UP"
LATENCY_SECONDS = 2.0
LATENCY_ROUNDS = 3
THROUGHPUT_EVENTS = 30_000
WINDOW = 4_000  # in flight at most: the outbox holds 10,000 by default
OUTAGE_S = 10.0
OUTAGE_RATE = 100
PCM_BYTES_PER_S = 16_000 * 2
WORDS_PER_S = 2.5  # conversational speech, ~150 words a minute

console = Console()


@contextlib.contextmanager
def process(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A side in its own process, terminated on exit."""
    verbose = bool(os.environ.get("BENCH_VERBOSE"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.bridge.sides", *args],
        stdout=subprocess.DEVNULL,
        stderr=None if verbose else subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        terminate_blocking(proc, 10)


@dataclass
class Path_:
    """One transport: publish on ``pub``, receive on ``sub``; ``proxy`` when routed via one."""

    name: str
    pub: NATS
    sub: NATS
    proxy: FaultyProxy | None = None
    rx: Receiver | None = None
    # JetStream form: publishes carry Nats-Msg-Id (the streams' dedupe key) and the
    # receiver reads home's sourced stream instead of subscribing to the subject.
    stream: str | None = None

    async def publish(self, data: bytes, event_id: str) -> None:
        """Publish one event on the board side."""
        headers = {"Nats-Msg-Id": event_id} if self.stream is not None else None
        await self.pub.publish(UP, data, headers=headers)


@contextlib.asynccontextmanager
async def ours(paired: Paired, via_proxy: bool) -> AsyncIterator[Path_]:
    """Edge NATS -> edge bridge process -> SSH -> home endpoint process -> home NATS."""
    port = free_port()
    with (
        nats_server() as edge_url,
        nats_server() as home_url,
        process(
            "home", str(paired.result.home_half), str(paired.result.host_key), home_url, str(port)
        ) as home_proc,
    ):
        wait_for_port_blocking("127.0.0.1", port, timeout_s=10, exit_code=home_proc.poll)
        proxy = FaultyProxy(port) if via_proxy else None
        if proxy is not None:
            await proxy.start()
        edge_port = proxy.port if proxy is not None else port
        with process(
            "edge",
            str(paired.result.edge_half),
            str(paired.result.client_key),
            edge_url,
            str(edge_port),
        ):
            pub, sub = await nats.connect(edge_url), await nats.connect(home_url)
            try:
                yield Path_("tether bridge", pub, sub, proxy)
            finally:
                await pub.close()
                await sub.close()
                if proxy is not None:
                    await proxy.stop()


def _jetstream(tmp: Path, domain: str) -> str:
    store = tmp / f"js-{domain}"
    if store.exists():
        shutil.rmtree(store)
    return f'jetstream {{ store_dir: "{store}", domain: {domain} }}\n'


async def _streams(pub: NATS, sub: NATS) -> None:
    """The board's stream of UP, and home's stream sourcing it across the leaf connection."""
    window = timedelta(minutes=2).total_seconds()
    await pub.jetstream().add_stream(
        StreamConfig(name=BOARD_STREAM, subjects=[UP], duplicate_window=window)
    )
    source = StreamSource(name=BOARD_STREAM, external=ExternalStream(api="$JS.board.API"))
    await sub.jetstream().add_stream(
        StreamConfig(name=HOME_STREAM, sources=[source], duplicate_window=window)
    )


@contextlib.asynccontextmanager
async def leaf(
    paired: Paired, tmp: Path, via_proxy: bool, jetstream: bool = False
) -> AsyncIterator[Path_]:
    """Leaf nats-server -> SSH local forward -> hub nats-server's leafnode port.

    With ``jetstream``, both servers run JetStream (domains ``board`` and ``home``): the
    board stores UP in a stream, home's stream sources it (store and forward across
    outages), both deduplicating by Nats-Msg-Id, and home's receiver reads its stream.
    """
    hub_leaf, ssh_port, fwd_port = free_port(), free_port(), free_port()
    form = "-js" if jetstream else ""
    hub_conf = tmp / f"hub{form}.conf"
    # no_advertise: the board must not learn (and bypass the tunnel to) the hub's real port
    hub_conf.write_text(
        f"leafnodes {{ listen: 127.0.0.1:{hub_leaf}, no_advertise: true }}\n"
        + (_jetstream(tmp, "home") if jetstream else "")
    )
    leaf_conf = tmp / f"leaf{form}.conf"
    leaf_conf.write_text(
        f'leafnodes {{ reconnect: 1, remotes [ {{ url: "nats-leaf://127.0.0.1:{fwd_port}" }} ] }}\n'
        + (_jetstream(tmp, "board") if jetstream else "")
    )
    secrets = paired.result.client_key.parent
    with (
        nats_server(hub_conf) as hub_url,
        process(
            "sshd",
            str(paired.result.host_key),
            str(secrets / "board.edge.key.pub"),
            str(ssh_port),
            str(hub_leaf),
        ) as sshd,
    ):
        wait_for_port_blocking("127.0.0.1", ssh_port, timeout_s=10, exit_code=sshd.poll)
        proxy = FaultyProxy(ssh_port) if via_proxy else None
        if proxy is not None:
            await proxy.start()
        with process(
            "sshfwd",
            str(secrets / "home_host_key.pub"),
            str(paired.result.client_key),
            str(proxy.port if proxy else ssh_port),
            str(fwd_port),
            str(hub_leaf),
        ) as fwd:
            await wait_for_port("127.0.0.1", fwd_port, timeout_s=20, exit_code=fwd.poll)
            with nats_server(leaf_conf) as leaf_url:
                pub, sub = await nats.connect(leaf_url), await nats.connect(hub_url)
                try:
                    if jetstream:
                        await _streams(pub, sub)
                        yield Path_(LEAF_JS, pub, sub, proxy, stream=HOME_STREAM)
                    else:
                        yield Path_(LEAF, pub, sub, proxy)
                finally:
                    await pub.close()
                    await sub.close()
                    if proxy is not None:
                        await proxy.stop()


@contextlib.asynccontextmanager
async def direct() -> AsyncIterator[Path_]:
    """One nats-server, publisher and subscriber both on it."""
    with nats_server() as url:
        pub, sub = await nats.connect(url), await nats.connect(url)
        try:
            yield Path_("bare NATS", pub, sub)
        finally:
            await pub.close()
            await sub.close()


class Receiver:
    """Subscribes on the home side and notes when each event_id arrives."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.duplicates = 0

    async def cb(self, msg: Msg) -> None:
        now = time.perf_counter()
        event_id = json.loads(msg.data)["event_id"]
        if event_id in self.arrived:
            self.duplicates += 1
        else:
            self.arrived[event_id] = now


def _event(i: int, text: str = "what is the weather like tomorrow") -> Event:
    return Event.new("sensation.turn", {"text": text}, source="bench", sequence_number=i)


async def _subscribe(path: Path_) -> Receiver:
    """The path's one receiver on UP, cleared (subscribed and probed the first time)."""
    if path.rx is not None:
        path.rx.arrived.clear()
        path.rx.duplicates = 0
        return path.rx
    rx = path.rx = Receiver()
    if path.stream is not None:
        await path.sub.jetstream().subscribe(
            UP, stream=path.stream, ordered_consumer=True, cb=rx.cb
        )
    else:
        await path.sub.subscribe(UP, cb=rx.cb)
    await path.sub.flush()
    # Interest must reach the far side (a leaf node learns it from the hub): wait for a probe.
    deadline = time.monotonic() + 20
    i = 0
    while not rx.arrived:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path.name}: nothing arrives")
        probe = _event(i)
        await path.publish(probe.to_json(), probe.event_id)
        i += 1
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    rx.arrived.clear()
    rx.duplicates = 0
    return rx


async def _wait_arrivals(rx: Receiver, ids: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(i in rx.arrived for i in ids[-50:]):
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)


async def latency(path: Path_, rate: int) -> list[float]:
    """Publish at ``rate`` for LATENCY_SECONDS; return each event's latency in ms."""
    rx = await _subscribe(path)
    count = int(rate * LATENCY_SECONDS)
    sent: dict[str, float] = {}
    start = time.perf_counter()
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        event = _event(i)
        data = event.to_json()
        sent[event.event_id] = time.perf_counter()
        await path.publish(data, event.event_id)
    await path.pub.flush()
    await _wait_arrivals(rx, list(sent), 10)
    return [(rx.arrived[e] - t) * 1000 for e, t in sent.items() if e in rx.arrived]


async def throughput(path: Path_) -> tuple[float, int]:
    """Events/s delivered with at most WINDOW in flight; and how many never arrived."""
    rx = await _subscribe(path)
    events = [_event(i) for i in range(THROUGHPUT_EVENTS)]
    wire = [(e.to_json(), e.event_id) for e in events]
    start = time.perf_counter()
    for i, (data, event_id) in enumerate(wire):
        while i - len(rx.arrived) >= WINDOW:
            await asyncio.sleep(0.001)
            if time.perf_counter() - start > 120:
                break
        await path.publish(data, event_id)
    await path.pub.flush()
    deadline = time.perf_counter() + 30
    last = len(rx.arrived)
    while len(rx.arrived) < THROUGHPUT_EVENTS and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
        if len(rx.arrived) == last and time.perf_counter() - start > 5:
            await asyncio.sleep(1.0)
            if len(rx.arrived) == last:
                break
        last = len(rx.arrived)
    stop = max(rx.arrived.values(), default=time.perf_counter())
    return len(rx.arrived) / (stop - start), THROUGHPUT_EVENTS - len(rx.arrived)


TURN = (
    "what is the weather going to be like tomorrow",
    "Tomorrow will be mostly sunny with a high of twelve degrees and a light breeze "
    "from the west, so a jacket should be enough.",
)


async def voice_turns(path: Path_, turns: int = 20) -> tuple[float, float, int]:
    """TCP bytes (both directions, SSH included) per turn: sensation + speak + speech ack.

    Returns (mean bytes per turn after the first, first turn's bytes, envelope bytes).
    """
    assert path.proxy is not None
    proxy = path.proxy
    turn_rx = await _subscribe(path)  # probes until the link carries events
    speak_rx, done_rx = Receiver(), Receiver()
    await path.pub.subscribe("events.workspace.main.out.speak.board", cb=speak_rx.cb)
    await path.sub.subscribe("events.action.speech.completed.*", cb=done_rx.cb)
    await path.pub.flush()
    await path.sub.flush()
    await asyncio.sleep(0.5)
    per_turn: list[int] = []
    envelope = 0
    for n in range(turns):
        before = proxy.bytes_up + proxy.bytes_down
        binding = f"b{n:031x}"
        sensation = Event.new(
            "sensation.turn",
            {"text": TURN[0]},
            source="edge.asr",
            sequence_number=n,
            binding_id=binding,
        )
        await path.pub.publish(UP, sensation.to_json())
        await _until(lambda s=sensation: s.event_id in turn_rx.arrived, "sensation")
        speak = Event.new(
            "speak", {"text": TURN[1]}, source="agent.main", sequence_number=n, binding_id=binding
        )
        await path.sub.publish("events.workspace.main.out.speak.board", speak.to_json())
        await _until(lambda s=speak: s.event_id in speak_rx.arrived, "speak")
        ack = Event.new(
            "speech.completed",
            {"ok": True, "text": "spoken"},
            source="edge.tts",
            sequence_number=n,
            binding_id=binding,
        )
        await path.pub.publish(f"events.action.speech.completed.{binding}", ack.to_json())
        await _until(lambda s=ack: s.event_id in done_rx.arrived, "speech ack")
        await asyncio.sleep(0.15)  # let the protocol acks for this turn cross too
        per_turn.append(proxy.bytes_up + proxy.bytes_down - before)
        envelope = sum(len(e.to_json()) for e in (sensation, speak, ack))
    return statistics.mean(per_turn[1:]), per_turn[0], envelope


async def _until(predicate: object, what: str, timeout_s: float = 10.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the voice turn's {what} event did not arrive")
        await asyncio.sleep(0.002)


async def outage(path: Path_) -> tuple[int, int, int]:
    """Publish at OUTAGE_RATE for 5 s + a 10 s outage + 5 s; return (published, lost, dupes)."""
    assert path.proxy is not None
    rx = await _subscribe(path)
    total = int(OUTAGE_RATE * (OUTAGE_S + 10))
    ids: list[str] = []
    cut = asyncio.create_task(_outage_after(path.proxy, 5.0))
    start = time.perf_counter()
    for i in range(total):
        delay = start + i / OUTAGE_RATE - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        event = _event(i)
        ids.append(event.event_id)
        await path.publish(event.to_json(), event.event_id)
    await cut
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(rx.arrived) < total:
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    lost = sum(1 for i in ids if i not in rx.arrived)
    return total, lost, rx.duplicates


async def _outage_after(proxy: FaultyProxy, after_s: float) -> None:
    await asyncio.sleep(after_s)
    await proxy.outage(OUTAGE_S)


def _vs(
    metric: str, unit: str, n: int, mine: float, peers: dict[str, float], note: str
) -> list[Result]:
    """One row per peer: the core leaf node, and the leaf node with JetStream."""
    return [Result(metric, mine, unit, n, name, value, note) for name, value in peers.items()]


async def _latency_rows(paths: tuple[Path_, ...]) -> list[Result]:
    results: list[Result] = []
    _, us, lf, lfjs = paths
    for rate in (100, 1000):
        # Interleaved rounds, pooled: load from anything else on the machine then
        # falls on every transport alike.
        samples: dict[str, list[float]] = {p.name: [] for p in paths}
        for _ in range(LATENCY_ROUNDS):
            for path in paths:
                samples[path.name] += await latency(path, rate)
        expected = int(rate * LATENCY_SECONDS) * LATENCY_ROUNDS
        lost = ", ".join(f"{p.name} {expected - len(samples[p.name])}" for p in paths[1:])
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            b, m, t, j = (quantile(samples[p.name], q) for p in paths)
            note = (
                f"bare NATS {label} {b:.3f} ms; ours {m:.3f} ms; leaf {t:.3f} ms; "
                f"leaf+JetStream {j:.3f} ms (lost: {lost})"
            )
            results += _vs(
                f"added latency {label} @ {rate} ev/s",
                "ms",
                len(samples[us.name]),
                m - b,
                {f"{lf.name} (added)": t - b, f"{lfjs.name} (added)": j - b},
                note,
            )
    return results


async def _throughput_rows(us: Path_, lf: Path_, lfjs: Path_) -> list[Result]:
    best: dict[str, tuple[float, int]] = {}
    for _ in range(2):  # the ceiling is the best of two runs each, alternated
        for path in (us, lf, lfjs):
            rate, lost = await throughput(path)
            if rate > best.get(path.name, (0.0, 0))[0]:
                best[path.name] = (rate, lost)
    undelivered = ", ".join(f"{name} {lost}" for name, (_, lost) in best.items())
    return _vs(
        "throughput ceiling, one tunnel",
        "events/s",
        THROUGHPUT_EVENTS,
        best[us.name][0],
        {lf.name: best[lf.name][0], lfjs.name: best[lfjs.name][0]},
        f"best of 2; at most {WINDOW} in flight; undelivered: {undelivered}",
    )


async def run() -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp_dir, Progress(console=console) as progress:
        tmp = Path(tmp_dir)
        paired = make_pair(tmp / "pair")
        task = progress.add_task("bridge benchmark", total=4)
        async with (
            direct() as bare,
            ours(paired, False) as us,
            leaf(paired, tmp, False) as lf,
            leaf(paired, tmp, False, jetstream=True) as lfjs,
        ):
            results += await _latency_rows((bare, us, lf, lfjs))
            progress.advance(task)
            results += await _throughput_rows(us, lf, lfjs)
            progress.advance(task)
        async with ours(paired, True) as us:
            warm, cold, envelope = await voice_turns(us)
            seconds = len(TURN[0].split()) / WORDS_PER_S + len(TURN[1].split()) / WORDS_PER_S
            pcm = seconds * PCM_BYTES_PER_S
            results.append(
                Result(
                    "TCP bytes per voice turn (sensation+speak+ack, SSH incl.)",
                    warm,
                    "bytes",
                    19,
                    "16 kHz 16-bit PCM streaming satellite",
                    pcm,
                    f"first turn {cold} B; envelopes {envelope} B raw; PCM for {seconds:.1f} s "
                    f"of speech ({WORDS_PER_S} words/s)",
                )
            )
            published, lost_ours, dup_ours = await outage(us)
            progress.advance(task)
        async with leaf(paired, tmp, True) as lf:
            _, lost_leaf, dup_leaf = await outage(lf)
        async with leaf(paired, tmp, True, jetstream=True) as lfjs:
            _, lost_js, dup_js = await outage(lfjs)
            progress.advance(task)
        results += _vs(
            f"events lost across one {OUTAGE_S:.0f} s outage",
            "events",
            published,
            lost_ours,
            {LEAF: lost_leaf, LEAF_JS: lost_js},
            f"{OUTAGE_RATE} ev/s for {published / OUTAGE_RATE:.0f} s; "
            f"duplicates: ours {dup_ours}, leaf {dup_leaf}, leaf+JetStream {dup_js}",
        )
        from tests.bench.bridge_durable import (  # noqa: PLC0415 - it imports this module
            durable_rows,
        )

        results += await durable_rows(paired, tmp)
    return results


def main() -> None:
    """Run the benchmark, print the table, write bench-results/bridge.json."""
    publish("bridge", asyncio.run(run()))


if __name__ == "__main__":
    main()
