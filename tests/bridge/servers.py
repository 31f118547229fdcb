"""Real servers for the bridge tests and benchmark: nats-server, and the two bridge sides."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bridge.node import EdgeBridgeNode, HomeBridgeEndpoint, WallClock
from bridge.pair import PairResult, pair
from bridge.transport import Backoff
from shared.event import Event
from shared.schema import BridgeHalf, load_bridge_half
from tests.bridge.faulty_proxy import FaultyProxy
from tests.support.loopback_nats import loopback_nats_server


@contextlib.contextmanager
def nats_server(config: Path | None = None, port: int | None = None) -> Iterator[str]:
    """A real nats-server on loopback (one per side, like a board and a home); yields its URL."""
    args = () if config is None else ("-c", str(config))
    with loopback_nats_server(*args, port=port) as url:
        yield url


def with_port(half: BridgeHalf, port: int) -> BridgeHalf:
    """The same half pointing at (or listening on) ``port``."""
    return dataclasses.replace(half, endpoint=dataclasses.replace(half.endpoint, port=port))


@dataclass
class Paired:
    """What `bridge pair` wrote for one device, loaded."""

    result: PairResult
    edge: BridgeHalf
    home: BridgeHalf


def make_pair(out: Path, device: str = "board") -> Paired:
    """Pair ``device`` into ``out`` and load both halves."""
    result = pair(device, "127.0.0.1:2222", out)
    return Paired(result, load_bridge_half(result.edge_half), load_bridge_half(result.home_half))


@dataclass
class Rig:
    """A running bridge: home NATS + endpoint, edge NATS + node, one client on each NATS."""

    home: HomeBridgeEndpoint
    edge: EdgeBridgeNode
    home_nc: NATS
    edge_nc: NATS
    home_url: str
    edge_url: str
    port: int
    proxy: FaultyProxy | None = None


@contextlib.asynccontextmanager
async def running_bridge(
    paired: Paired,
    home_url: str,
    edge_url: str,
    *,
    proxy: bool = False,
    heartbeat_s: float = 0.5,
    backoff: Backoff | None = None,
    edge_half: BridgeHalf | None = None,
    home_clock: WallClock | None = None,
    edge_clock: WallClock | None = None,
    edge_outbox: Path | None = None,
) -> AsyncIterator[Rig]:
    """Start the home endpoint (port 0) and the edge node; ``proxy`` puts a FaultyProxy between.

    ``home_clock`` and ``edge_clock`` stand in for each side's wall clock (default: the system's);
    ``edge_outbox`` makes the edge side durable, with its outbox file in that folder.
    """
    home = HomeBridgeEndpoint(
        [paired.home],
        host_key=paired.result.host_key,
        nats_url=home_url,
        port=0,
        heartbeat_s=heartbeat_s,
        clock=home_clock,
    )
    await home.start()
    edge: EdgeBridgeNode | None = None
    faults: FaultyProxy | None = None
    home_nc = await nats.connect(home_url)
    edge_nc = await nats.connect(edge_url)
    try:
        port = home.port
        if proxy:
            faults = FaultyProxy(home.port)
            await faults.start()
            port = faults.port
        edge = EdgeBridgeNode(
            with_port(edge_half or paired.edge, port),
            client_key=paired.result.client_key,
            nats_url=edge_url,
            heartbeat_s=heartbeat_s,
            backoff=backoff or Backoff(base_s=0.05, cap_s=0.5, rng=random.Random(7)),
            status_interval_s=0.5,
            clock=edge_clock,
            outbox_dir=edge_outbox,
        )
        await edge.start()
        yield Rig(home, edge, home_nc, edge_nc, home_url, edge_url, home.port, faults)
    finally:
        if edge is not None:
            await edge.close()
        if faults is not None:
            await faults.stop()
        await home.close()
        await home_nc.close()
        await edge_nc.close()


async def wait_until(predicate: object, timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate()`` until true; TimeoutError naming ``what`` otherwise."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


class Collector:
    """Collects messages from a NATS subscription: ``await nc.subscribe(s, cb=box.cb)``."""

    def __init__(self) -> None:
        self.msgs: list[Msg] = []

    async def cb(self, msg: Msg) -> None:
        """The subscription callback."""
        self.msgs.append(msg)

    def subjects(self) -> list[str]:
        """Subjects received so far, in order."""
        return [m.subject for m in self.msgs]

    def events(self) -> list[Event]:
        """Envelopes received so far, in order."""
        return [Event.from_json(m.data) for m in self.msgs]
