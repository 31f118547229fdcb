"""The home bridge endpoint, supervised by ``home up`` like any other component.

It serves every device paired into the data directory: ``bridge pair --device D
--out DATA_DIR/bridge`` writes ``D.home.yaml`` there and the endpoint's host key
into ``DATA_DIR/bridge/secrets/``. A home with no paired device runs no endpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bridge.errors import BridgeError
from bridge.node.home import HomeBridgeEndpoint
from bridge.pair import HOST_KEY_NAME
from home.substrate.component import ComponentInfo, Health
from home.substrate.errors import ComponentError
from shared.errors import SchemaError
from shared.schema import BridgeHalf, load_bridge_half

BRIDGE_DIR = "bridge"


def paired_home_halves(data_dir: Path) -> list[Path]:
    """The home halves ``bridge pair`` wrote into ``DATA_DIR/bridge``, sorted by name."""
    return sorted((data_dir / BRIDGE_DIR).glob("*.home.yaml"))


class HomeBridgeComponent:
    """The embedded asyncssh endpoint for every paired device (component name ``bridge``)."""

    name = "bridge"

    def __init__(
        self, data_dir: Path, nats_url: Callable[[], str], *, port: int | None = None
    ) -> None:
        self._data_dir = data_dir
        self._nats_url = nats_url
        self._port = port
        self._endpoint: HomeBridgeEndpoint | None = None

    def _halves(self) -> list[BridgeHalf]:
        halves = []
        for path in paired_home_halves(self._data_dir):
            try:
                halves.append(load_bridge_half(path))
            except SchemaError as exc:
                raise ComponentError(f"bridge: paired half {path} is unusable: {exc}") from exc
        return halves

    async def start(self) -> None:
        """Listen for every paired device; ComponentError if a half or the host key is bad."""
        host_key = self._data_dir / BRIDGE_DIR / "secrets" / HOST_KEY_NAME
        if not host_key.is_file():
            raise ComponentError(
                f"bridge: the endpoint's host key {host_key} is missing; pair a device with "
                f"`bridge pair --device NAME --home HOST:PORT --out {self._data_dir / BRIDGE_DIR}`"
            )
        try:
            endpoint = HomeBridgeEndpoint(
                self._halves(), host_key=host_key, nats_url=self._nats_url(), port=self._port
            )
            await endpoint.start()
        except (BridgeError, OSError) as exc:
            raise ComponentError(f"bridge: the endpoint did not start: {exc}") from exc
        self._endpoint = endpoint

    async def health(self) -> Health:
        """Healthy while listening; the detail names each device's link state."""
        if self._endpoint is None:
            return Health(False, "not started")
        report = self._endpoint.health()
        links = ", ".join(
            f"{device} {state.get('state', '?')}"
            for device, state in sorted(report["devices"].items())
        )
        return Health(bool(report["ok"]), links)

    def links(self) -> dict[str, object]:
        """Each device's link state and counters, for ``home status``."""
        return {} if self._endpoint is None else dict(self._endpoint.health()["devices"])

    async def stop(self) -> None:
        """Stop listening and end every link; idempotent."""
        if self._endpoint is not None:
            await self._endpoint.stop()
            self._endpoint = None

    def info(self) -> ComponentInfo:
        """``ssh://host:port`` of the endpoint."""
        if self._endpoint is None:
            return ComponentInfo(f"ssh (port {self._port or 'from the halves'})", None)
        return ComponentInfo(f"ssh://{self._endpoint.host}:{self._endpoint.port}", None)
