"""``edge run --data-dir``: pair with the home running from that data directory, on this machine.

The home's ``home.json`` names its NATS; the control verb ``bridge.pair`` has home
make the board's keys and both halves (once) and serve the device at once; the
edge then connects through the real SSH endpoint like any board.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import nats
from nats.errors import Error as NatsError

from edge.config.model import BridgeConfig, EdgeConfig
from edge.errors import BridgeUnavailable

STATE_FILE = "home.json"
PAIR_SUBJECT = "home.control.bridge.pair"
PAIR_TIMEOUT_S = 30.0


async def pair_with_home(config: EdgeConfig, data_dir: Path) -> EdgeConfig:
    """``config`` with its bridge half and secrets from pairing with the home in ``data_dir``."""
    state = data_dir / STATE_FILE
    try:
        nats_url = json.loads(state.read_text())["nats_url"]
    except (OSError, ValueError, KeyError) as exc:
        raise BridgeUnavailable(
            f"no running home in {data_dir} ({state}: {exc}); start one with "
            f"`home up --data-dir {data_dir}`"
        ) from exc
    try:
        nc = await nats.connect(nats_url, allow_reconnect=False, connect_timeout=5)
    except (NatsError, OSError) as exc:
        raise BridgeUnavailable(
            f"the home in {data_dir} does not answer at {nats_url}: {exc}"
        ) from exc
    try:
        request = json.dumps({"device": config.device}).encode()
        msg = await nc.request(PAIR_SUBJECT, request, timeout=PAIR_TIMEOUT_S)
    except (NatsError, TimeoutError) as exc:
        raise BridgeUnavailable(
            f"the home in {data_dir} did not pair {config.device!r}: {exc}"
        ) from exc
    finally:
        await nc.close()
    reply = json.loads(msg.data)
    if not reply.get("ok"):
        why = reply.get("error", {}).get("message")
        raise BridgeUnavailable(f"the home in {data_dir} refused to pair {config.device!r}: {why}")
    result = reply["result"]
    return replace(
        config, bridge=BridgeConfig(half=Path(result["edge_half"]), secrets=Path(result["secrets"]))
    )
