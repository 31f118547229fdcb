"""confirm_subscriptions against a real nats-server: a message published by another
client right after it returns reaches every fresh subscription."""

from __future__ import annotations

import asyncio

import nats

from shared.nats_confirm import confirm_subscriptions

ROUNDS = 200


async def test_a_confirmed_subscription_gets_the_very_next_message_from_a_peer(
    nats_url: str,
) -> None:
    listener = await nats.connect(nats_url)
    peer = await nats.connect(nats_url)
    try:
        missed = []
        for n in range(ROUNDS):
            subject = f"confirm.round.{n}"
            sub = await listener.subscribe(subject)
            await confirm_subscriptions(listener)
            await peer.publish(subject, b"x")
            await peer.flush()
            try:
                await sub.next_msg(timeout=2)
            except (TimeoutError, nats.errors.TimeoutError):
                missed.append(n)
            await sub.unsubscribe()
        assert missed == []
    finally:
        await asyncio.gather(listener.close(), peer.close())
