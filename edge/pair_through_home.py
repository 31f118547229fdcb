"""Pairing with the home that runs from a data directory on this machine.

The home's ``home.json`` names its NATS; the control verb ``bridge.pair`` has home
make the device's keys and both halves (once) and serve the device at once. The
edge then connects through the real SSH endpoint like any board. ``edge run``,
``edge say`` and ``edge tui`` with ``--data-dir`` all pair this way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import nats
from nats.errors import Error as NatsError

from bridge.pair import PairingFiles
from edge.config.model import BridgeConfig, EdgeConfig
from edge.errors import BridgeUnavailable
from shared.bus_credentials import home_admin_url
from shared.control import BRIDGE_PAIR, PairReply, PairRequest, control_subject
from shared.errors import BusCredentialsError, EnvelopeError, HomeNotRunning
from shared.home_state import HomeState, HomeStateError

PAIR_TIMEOUT_S = 30.0
# A stale home.json (home killed) must not cost a person more than a few seconds.
CONNECT_TIMEOUT_S = 3.0
# nats-server drops a client still in its handshake while it reloads its authorization,
# which it does after every pairing: boards paired side by side retry that once or twice.
CONNECT_RETRIES = 3


@dataclass(frozen=True)
class HomePairing:
    """Where home put the device's edge half and its secrets (the board's key)."""

    device: str
    edge_half: Path
    secrets: Path

    @property
    def client_key(self) -> Path:
        """The board's private key, as ``bridge pair`` names it."""
        return PairingFiles.of(self.edge_half.parent, self.device, self.secrets).client_key


async def pair_through_home(data_dir: Path, device: str) -> HomePairing:
    """Pair ``device`` with the home running from ``data_dir`` and have it served now."""
    try:
        nats_url = HomeState.load(data_dir).nats_url
    except HomeStateError as exc:
        raise HomeNotRunning(
            f"no running home in {data_dir} ({exc}); start one with `home up --data-dir {data_dir}`"
        ) from exc
    try:
        # As the home's admin: pairing is a control verb (docs/architecture.md "Security").
        admin = home_admin_url(data_dir, nats_url)
    except BusCredentialsError as exc:
        raise HomeNotRunning(f"the home in {data_dir} cannot be spoken to: {exc}") from exc
    try:
        nc = await nats.connect(
            admin,
            connect_timeout=CONNECT_TIMEOUT_S,
            max_reconnect_attempts=CONNECT_RETRIES,
            reconnect_time_wait=0.2,
        )
    except (NatsError, OSError) as exc:
        raise HomeNotRunning(
            f"the home in {data_dir} does not answer at {nats_url} ({exc}); is "
            f"`home up --data-dir {data_dir}` still running?"
        ) from exc
    try:
        request = PairRequest(device).to_json()
        msg = await nc.request(control_subject(BRIDGE_PAIR), request, timeout=PAIR_TIMEOUT_S)
    except (NatsError, TimeoutError) as exc:
        raise BridgeUnavailable(f"the home in {data_dir} did not pair {device!r}: {exc}") from exc
    finally:
        await nc.close()
    try:
        reply = PairReply.from_json(msg.data)
    except EnvelopeError as exc:
        raise BridgeUnavailable(f"the home in {data_dir} answered a pairing with {exc}") from exc
    if reply.result is None:
        why = reply.message
        raise BridgeUnavailable(f"the home in {data_dir} refused to pair {device!r}: {why}")
    return HomePairing(device, Path(reply.result.edge_half), Path(reply.result.secrets))


async def pair_with_home(config: EdgeConfig, data_dir: Path) -> EdgeConfig:
    """``config`` with its bridge half and secrets from pairing with the home in ``data_dir``."""
    pairing = await pair_through_home(data_dir, config.device)
    return replace(config, bridge=BridgeConfig(half=pairing.edge_half, secrets=pairing.secrets))
