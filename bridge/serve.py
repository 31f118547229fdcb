"""`bridge serve`: the home side of one link over stdin/stdout, for OpenSSH forced commands.

OpenSSH authenticates the board and runs, per its ``authorized_keys`` line::

    command="bridge serve --device board --half /etc/tether/board.home.yaml",restrict \\
        ssh-ed25519 AAAA...   (one line in the file)

(with ``Subsystem tether-bridge /bin/false`` in ``sshd_config``, since the edge asks for
that subsystem), so the key decides the device exactly as in the embedded endpoint. The frames
travel on stdin/stdout; logs go to stderr. Delivery state lives in this process:
it lasts as long as one SSH connection (see PROTOCOL.md, "OpenSSH forced command").
"""

from __future__ import annotations

import contextlib
import logging

import nats
from nats.errors import Error as NatsError

from bridge.errors import HelloRefused, LinkError
from bridge.node.core import BridgeCore
from bridge.transport.stdio import stdio_streams
from shared.errors import SchemaError, SchemaIssue
from shared.schema.bridge_half import BridgeHalf

log = logging.getLogger("tether.bridge.serve")


async def serve_stdio(half: BridgeHalf, device: str, nats_url: str) -> None:
    """Run one link on stdin/stdout until it ends; HelloRefused if the peer's half is refused,
    SchemaError if ``half`` is not the home half of ``device``."""
    if half.side != "home":
        raise _unfit(
            half, "bridge.side", f"is a {half.side} half; `bridge serve` needs a home half"
        )
    if half.device != device:
        raise _unfit(
            half,
            "bridge.device",
            f"is device {half.device!r} but the forced command says {device!r}",
        )
    try:
        nc = await nats.connect(nats_url, name=f"bridge-serve-{device}")
    except (NatsError, OSError) as exc:
        raise LinkError(f"cannot connect to local NATS at {nats_url}: {exc}") from exc
    core = BridgeCore(half, nc, device=device)
    try:
        await core.start()
        reader, writer = await stdio_streams()
        try:
            await core.run_link(reader, writer, authenticated_device=device, peer="stdio")
        except HelloRefused:
            raise
        except LinkError as exc:
            log.info("link ended: %s", exc)
    finally:
        await core.close()
        with contextlib.suppress(NatsError, OSError):
            await nc.drain()


def _unfit(half: BridgeHalf, key: str, message: str) -> SchemaError:
    """The half is a valid document but not the one this link needs: bad configuration."""
    return SchemaError([SchemaIssue(str(half.file), None, key, message)])
