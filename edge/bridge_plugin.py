"""Where the edge bridge node plugs into ``edge run``.

With ``bridge.half`` configured, ``edge run`` opens :func:`open_edge_bridge`
after its local nodes have subscribed and before capture starts (see
:mod:`edge.runtime`), so nothing home sends is missed and no turn is made
before the bridge can carry it. While open, :class:`bridge.node.edge.EdgeBridgeNode`
runs against the edge's loopback NATS: it forwards the half's exports home,
publishes the imports it receives, and publishes a
:class:`shared.messages.bridge.BridgeStatus` on
:func:`shared.subjects.bridge_status_subject` while home is unreachable (the
edge speaks its notice from that).

Its durable outbox lives in ``bridge.outbox`` of edge.yaml, by default beside the half in
``outbox/`` (:mod:`bridge.node.outbox`).

With no ``bridge.half`` the edge is local-only: turns stay on its own NATS.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

from bridge.errors import BridgeError
from bridge.node.edge import EdgeBridgeNode
from bridge.node.outbox import OUTBOX_DIR
from bridge.pair import PairingFiles
from edge.errors import BridgeUnavailable
from shared.errors import SchemaError
from shared.schema import BridgeHalf, load_bridge_half


class EdgeBridgeFactory(Protocol):
    """Opens the edge bridge node for one half against the edge's loopback NATS."""

    def __call__(
        self,
        *,
        half: Path,
        secrets: Path | None,
        nats_url: str,
        device: str,
        outbox: Path | None = None,
    ) -> AbstractAsyncContextManager[object]: ...


def client_key_path(half: Path, secrets: Path | None, device: str) -> Path:
    """The board's private key as ``bridge pair`` wrote it: ``SECRETS/<device>.edge.key``."""
    return PairingFiles.of(half.parent, device, secrets).client_key


def check_bridge_files(half: Path, secrets: Path | None, device: str) -> BridgeHalf:
    """Load the half and check the key exists; BridgeUnavailable names what is wrong."""
    try:
        loaded = load_bridge_half(half)
    except SchemaError as exc:
        raise BridgeUnavailable(f"bridge.half {half} is not a usable edge half: {exc}") from exc
    if loaded.side != "edge":
        raise BridgeUnavailable(f"bridge.half {half} is a {loaded.side} half; the board needs edge")
    if loaded.device != device:
        raise BridgeUnavailable(
            f"bridge.half {half} is for device {loaded.device!r}, but this edge is {device!r}"
        )
    key = client_key_path(half, secrets, device)
    if not key.is_file():
        raise BridgeUnavailable(
            f"the board's key {key} is missing; pair the board with: "
            f"bridge pair --device {device} --home HOST:PORT"
        )
    return loaded


@asynccontextmanager
async def open_edge_bridge(
    *, half: Path, secrets: Path | None, nats_url: str, device: str, outbox: Path | None = None
) -> AsyncIterator[EdgeBridgeNode]:
    """Run the edge bridge node for ``half`` on the edge's NATS while the context is open.

    Its durable outbox is kept in ``outbox`` (default ``outbox/`` beside the half).
    """
    loaded = check_bridge_files(half, secrets, device)
    node = EdgeBridgeNode(
        loaded,
        client_key=client_key_path(half, secrets, device),
        nats_url=nats_url,
        outbox_dir=outbox if outbox is not None else half.parent / OUTBOX_DIR,
    )
    try:
        await node.start()
    except BridgeError as exc:
        await node.close()
        raise BridgeUnavailable(f"the edge bridge node did not start: {exc}") from exc
    try:
        yield node
    finally:
        await node.close()
