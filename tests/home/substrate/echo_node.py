"""A real ``service`` node for the substrate's tests: a NATS client in its own process.

It answers its health subject, and for every event on its inbox it publishes
what an agent would: a device-less speak (``events.workspace.<agent>.out.speak``)
carrying the inbound binding_id, exactly as τ's builtin ``nats_bus`` does.

    python echo_node.py --inbox events.workspace.echo.in --agent echo --health home.test.echo.health
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal

import nats
from nats.aio.msg import Msg

from shared.event import Event


async def serve(inbox: str, agent: str, health: str) -> None:
    """Run until SIGTERM."""
    nc = await nats.connect(os.environ["NATS_URL"], name=os.environ.get("TETHER_NODE", "echo"))
    sequence = 0

    async def on_event(msg: Msg) -> None:
        nonlocal sequence
        event = Event.from_json(msg.data)
        sequence += 1
        reply = Event.new(
            "speak",
            {"text": f"echo: {event.payload.get('text', '')}"},
            source=f"agent.{agent}",
            sequence_number=sequence,
            binding_id=event.binding_id,
            hops=("tool.speak",),
        )
        await nc.publish(f"events.workspace.{agent}.out.speak", reply.to_json())

    async def on_health(msg: Msg) -> None:
        await msg.respond(json.dumps({"ok": True, "pid": os.getpid()}).encode())

    await nc.subscribe(inbox, cb=on_event)
    await nc.subscribe(health, cb=on_health)
    await nc.flush()
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    await nc.drain()


def main() -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--inbox", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--health", required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.inbox, args.agent, args.health))


if __name__ == "__main__":
    main()
