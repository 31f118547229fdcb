"""The home bridge endpoint as a ``home up`` component: every paired device's SSH link."""

from home.bridge.component import (
    BRIDGE_DIR,
    HomeBridgeComponent,
    PairedHalves,
    paired_home_halves,
)

__all__ = ["BRIDGE_DIR", "HomeBridgeComponent", "PairedHalves", "paired_home_halves"]
