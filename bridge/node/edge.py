"""The edge bridge node: one board's side of its bridge, as a component `edge run` starts.

Connects out to the home endpoint (pinned host key, the board's key), keeps the
link up with capped exponential backoff and jitter, and says on the local
``events.bridge.<name>.status`` subject whenever home is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError

from bridge.errors import BridgeError, HelloRefused, LinkError, TransportRefused
from bridge.node.clock import WallClock
from bridge.node.core import BridgeCore
from bridge.node.outbox import OutboxStore, Synchronous, store_path
from bridge.transport.backoff import Backoff
from bridge.transport.client import open_bridge_channel
from shared.lifecycle import Service, cancel_and_wait
from shared.messages.bridge import LINK_DOWN, LINK_REFUSED
from shared.schema.bridge_half import BridgeHalf

log = logging.getLogger("tether.bridge.edge")
# How long a short-lived edge waits for home to acknowledge what it sent (:meth:`settle`).
SETTLE_S = 2.0
_SETTLE_POLL_S = 0.02


class EdgeBridgeNode(Service):
    """Start with :meth:`start`, check with :meth:`health`, end with :meth:`close`.

    ``half`` must be an edge half; ``client_key`` the board's private key file;
    ``outbox_dir``, when given, holds the durable outbox (:mod:`bridge.node.outbox`);
    ``clock`` is the board's wall clock (default: the system's, :mod:`bridge.node.clock`).
    """

    def __init__(
        self,
        half: BridgeHalf,
        *,
        client_key: Path,
        nats_url: str,
        backoff: Backoff | None = None,
        heartbeat_s: float = 2.0,
        status_interval_s: float = 10.0,
        connect_timeout_s: float = 10.0,
        outbox_dir: Path | None = None,
        synchronous: Synchronous = "NORMAL",
        clock: WallClock | None = None,
    ) -> None:
        if half.side != "edge":
            raise BridgeError(f"{half.file} is a {half.side} half; the edge node needs side: edge")
        self.half = half
        self._client_key = client_key
        self._nats_url = nats_url
        self._backoff = backoff or Backoff()
        self._heartbeat_s = heartbeat_s
        self._status_interval_s = status_interval_s
        self._connect_timeout_s = connect_timeout_s
        self._outbox_dir = outbox_dir
        self._synchronous: Synchronous = synchronous
        self._clock = clock
        self._nc: NATS | None = None
        self._core: BridgeCore | None = None
        self._task: asyncio.Task[None] | None = None
        self._failed_attempts = 0
        self._closing = False

    @property
    def core(self) -> BridgeCore:
        """The running core (counters, outbox); only after :meth:`start`."""
        if self._core is None:
            raise BridgeError("the edge bridge node is not started")
        return self._core

    async def start(self) -> None:
        """Connect to local NATS, subscribe the exports, start connecting to home."""
        self._closing = False
        try:
            self._nc = await nats.connect(self._nats_url, name=f"bridge-{self.half.bridge}-edge")
        except (NatsError, OSError) as exc:
            raise LinkError(f"cannot connect to local NATS at {self._nats_url}: {exc}") from exc
        store = None
        if self._outbox_dir is not None:
            store = OutboxStore(store_path(self._outbox_dir, self.half), self._synchronous)
        self._core = BridgeCore(
            self.half, self._nc, heartbeat_s=self._heartbeat_s, store=store, clock=self._clock
        )
        await self._core.start()
        self._task = asyncio.create_task(
            self._connect_loop(), name=f"bridge-edge-{self.half.bridge}"
        )

    def health(self) -> dict[str, Any]:
        """``ok`` while the link to home is up and the outbox commits; state and counters.

        ``failed_attempts`` counts the connections that ended or never came up.
        """
        if self._core is None:
            return {"ok": False, "state": "stopped"}
        report = self._core.health()
        # A link carries nothing new while the outbox cannot commit (store_fault names it).
        report["ok"] = report["state"] == "up" and report["store_fault"] is None
        report["failed_attempts"] = self._failed_attempts
        return report

    async def settle(self, timeout_s: float = SETTLE_S) -> bool:
        """Wait, at most ``timeout_s``, until home has acknowledged every event this side
        took from its local NATS (its outbox is empty) or the link is down; True if it has.

        A short-lived edge (the keyboard's ``edge say``) calls it before :meth:`close`: a
        speech ack published just before the end then reaches home now, and the speak
        it acknowledges is not sent again at the next start.
        """
        if self._core is None or self._nc is None:
            return True
        with contextlib.suppress(NatsError, TimeoutError):
            # What the edge published before this is delivered to this side's subscriptions
            # ahead of the flush's PONG. (Never cancel a nats-py flush: see core.flush_local.)
            await asyncio.shield(self._nc.flush(timeout=max(1, round(timeout_s))))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            await asyncio.sleep(_SETTLE_POLL_S)
            report = self._core.health()
            if report["outbox"] == 0 or report["state"] != "up":
                break
        return bool(self._core.health()["outbox"] == 0)

    async def close(self) -> None:
        """Close the link and NATS; idempotent."""
        # Python 3.11's wait_for (inside asyncssh.connect) swallows a cancellation that
        # lands as the connect completes (a refused key, say): the loop must also see this.
        self._closing = True
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._core is not None:
            await self._core.close()
        if self._nc is not None:
            with contextlib.suppress(NatsError, OSError):
                await self._nc.drain()
            self._nc = None

    async def _connect_loop(self) -> None:
        core = self.core
        addresses = self.half.endpoint.addresses()
        attempt = 0
        while not self._closing:
            # After each link that ends or never comes up, the next member of the home.
            endpoint = addresses[attempt % len(addresses)]
            attempt += 1
            where = f"{endpoint.host}:{endpoint.port}"
            state, detail = LINK_DOWN, ""
            ups = core.counters.link_ups
            try:
                async with open_bridge_channel(
                    endpoint, self._client_key, connect_timeout_s=self._connect_timeout_s
                ) as channel:
                    await core.run_link(channel.reader, channel.writer, peer=where)
            except HelloRefused as exc:
                state, detail = LINK_REFUSED, exc.message
                log.error("home refused the bridge at hello: %s", exc)
            except TransportRefused as exc:
                state, detail = LINK_REFUSED, str(exc)
                log.error("%s", exc)
            except BridgeError as exc:
                detail = str(exc)
                log.warning("bridge link to %s down: %s", where, exc)
            self._failed_attempts += 1
            if self._closing:
                return
            if core.counters.link_ups > ups:
                # The link was up (hello accepted): start over from the base delay. A link
                # refused at hello keeps backing off, so a mispaired board does not hammer home.
                self._backoff.reset()
            delay = self._backoff.next_delay()
            await core.publish_status(state, detail)
            await self._sleep_reporting(delay, state, detail)

    async def _sleep_reporting(self, delay: float, state: str, detail: str) -> None:
        # While home is unreachable, keep saying so on the status subject.
        while delay > 0:
            step = min(delay, self._status_interval_s)
            await asyncio.sleep(step)
            delay -= step
            if delay > 0:
                await self.core.publish_status(state, detail, changed=False)
