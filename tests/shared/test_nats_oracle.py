"""Wildcard matching checked against a real nats-server as the oracle.

Each example subscribes a batch of random patterns, publishes a batch of random
subjects, and compares what the server delivered to each subscription with
what :func:`shared.subjects.matches` predicts, pair by pair.
"""

from __future__ import annotations

import asyncio

import nats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.subjects import matches

TOKENS = ("a", "b", "c")


@st.composite
def pattern(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 4))
    tokens = [draw(st.sampled_from((*TOKENS, "*"))) for _ in range(n)]
    if draw(st.booleans()):
        tokens[-1] = ">"
    return ".".join(tokens)


subject = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5).map(".".join)


async def _deliveries(url: str, pats: list[str], subs: list[str]) -> set[tuple[int, str]]:
    """Which (pattern index, subject) pairs the server delivered."""
    got: set[tuple[int, str]] = set()
    expected = sum(matches(p, s) for p in pats for s in subs)
    nc = await nats.connect(url)
    try:
        for i, p in enumerate(pats):

            async def record(msg: nats.aio.msg.Msg, i: int = i) -> None:
                got.add((i, msg.subject))

            await nc.subscribe(f"oracle.{p}", cb=record)
        await nc.flush()
        for s in subs:
            await nc.publish(f"oracle.{s}", b"")
        await nc.flush()
        # Wait for at least the predicted deliveries (bounded), then one more
        # round trip so any delivery beyond the prediction arrives too.
        async with asyncio.timeout(5):
            while len(got) < expected:
                await asyncio.sleep(0.005)
        await nc.flush()
        await asyncio.sleep(0.02)
    finally:
        await nc.close()
    return got


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pats=st.lists(pattern(), min_size=1, max_size=12, unique=True),
    subs=st.lists(subject, min_size=1, max_size=12, unique=True),
)
def test_matches_agrees_with_nats_server(nats_url: str, pats: list[str], subs: list[str]) -> None:
    delivered = asyncio.run(_deliveries(nats_url, pats, subs))
    predicted = {(i, f"oracle.{s}") for i, p in enumerate(pats) for s in subs if matches(p, s)}
    assert delivered == predicted
