"""Where the edge bridge node plugs into ``edge run``.

The bridge is built in :mod:`bridge` (issue 7); the edge only needs this much
of it. A bridge implementation provides, in ``bridge/edge_node.py``::

    def open_edge_bridge(
        *, half: Path, secrets: Path | None, nats_url: str, device: str
    ) -> AbstractAsyncContextManager[object]: ...

While the returned context is open, the edge bridge node runs against the
edge's loopback NATS at ``nats_url``: it forwards the half's exports home,
publishes the imports it receives, and publishes a
:class:`shared.bridge_status.BridgeStatus` on
:func:`shared.subjects.bridge_status_subject` whenever home becomes unreachable
or reachable again (the edge speaks its notice from that). Leaving the context
stops the node cleanly. ``edge run`` enters it after the local nodes have
subscribed and before capture starts (see :mod:`edge.runtime`), so nothing home
sends is missed and no turn is made before the bridge can carry it.

With no ``bridge.half`` configured, ``edge run`` is a local-only edge: turns
are published on the local NATS and anything local may answer them.
"""

from __future__ import annotations

import importlib
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol, cast

from edge.errors import BridgeUnavailable

BRIDGE_MODULE = "bridge.edge_node"
BRIDGE_FACTORY = "open_edge_bridge"


class EdgeBridgeFactory(Protocol):
    """Opens the edge bridge node for one half against the edge's loopback NATS."""

    def __call__(
        self, *, half: Path, secrets: Path | None, nats_url: str, device: str
    ) -> AbstractAsyncContextManager[object]: ...


def load_bridge_factory() -> EdgeBridgeFactory:
    """The installed edge bridge node, or BridgeUnavailable saying what is missing."""
    try:
        module = importlib.import_module(BRIDGE_MODULE)
    except ModuleNotFoundError as exc:
        raise BridgeUnavailable(
            f"bridge.half is configured but this installation has no edge bridge node "
            f"({BRIDGE_MODULE} is missing): remove bridge.half to run a local-only edge"
        ) from exc
    factory = getattr(module, BRIDGE_FACTORY, None)
    if not callable(factory):
        raise BridgeUnavailable(f"{BRIDGE_MODULE} has no callable {BRIDGE_FACTORY}()")
    return cast(EdgeBridgeFactory, factory)
