"""Proof that nats-server holds this client's new subscriptions.

``await nc.flush()`` alone does not prove it in nats-py: ``flush()`` writes its PING
straight to the socket (``Client._send_ping``), while a ``SUB`` from ``subscribe()``
waits in the pending buffer for the flusher task. So the PONG can come back before
the server has read the ``SUB`` (seen in a server trace: PING, PONG, a peer's PUB,
then our SUB), and a message published right then is not delivered to us.

The first flush also kicks the flusher, which writes the pending ``SUB`` lines as
soon as the loop runs it, long before any PONG can be read; the second PING is
therefore written behind them, and its PONG means the server has them.
"""

from __future__ import annotations

from nats.aio.client import Client


async def confirm_subscriptions(nc: Client) -> None:
    """Return once the server has every subscription ``nc`` made before the call."""
    await nc.flush()
    await nc.flush()
