"""SSH transport: the home endpoint (asyncssh server) and the edge's pinned-host-key client."""

from bridge.transport.backoff import Backoff
from bridge.transport.client import BridgeChannel, open_bridge_channel
from bridge.transport.server import BRIDGE_SUBSYSTEM, AuthorizedClient, listen_bridge
from bridge.transport.streams import ByteReader, ByteWriter

__all__ = [
    "BRIDGE_SUBSYSTEM",
    "AuthorizedClient",
    "Backoff",
    "BridgeChannel",
    "ByteReader",
    "ByteWriter",
    "listen_bridge",
    "open_bridge_channel",
]
