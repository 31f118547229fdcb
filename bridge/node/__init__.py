"""The bridge nodes: the shared core, the edge node and the home endpoint."""

from bridge.node.clock import WallClock
from bridge.node.core import BridgeCore
from bridge.node.counters import BridgeCounters
from bridge.node.edge import EdgeBridgeNode
from bridge.node.home import HomeBridgeEndpoint
from bridge.node.status import status_subject

__all__ = [
    "BridgeCore",
    "BridgeCounters",
    "EdgeBridgeNode",
    "HomeBridgeEndpoint",
    "WallClock",
    "status_subject",
]
