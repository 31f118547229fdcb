"""The router's boundary: every event it cannot deliver is counted under a named reason.

The slowest fuzzed case is reported (tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from home.substrate import router as router_module
from home.substrate.router import Router
from home.substrate.routing import Route
from shared.event import Event, new_binding_id
from shared.messages.voice import Heard, Turn
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report

ROUTE = Route("talk", "events.sensation.*.turn", "agent.echo", "events.workspace.echo.in")
TURN = "events.sensation.tui.turn"
ROUTER = Slowest("router envelopes")


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(ROUTER)


@dataclass
class Msg:
    subject: str
    data: bytes


class Published:
    """Stands in for the NATS client: records what the router publishes."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.subjects.append(subject)


def _turn(**changes: object) -> bytes:
    data = Event.new("sensation.turn", {"text": "hi"}, source="edge", sequence_number=1).to_dict()
    data.update(changes)
    return json.dumps(data).encode()


POISONED = {
    "deep nesting": b'{"payload": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "huge ttl": _turn(ttl_ms=10**17),
    "year 9999": _turn(timestamp="9999-12-31T23:59:59+00:00"),
    "not utf-8": b"\xff\xfe",
}


async def test_every_poisoned_event_is_counted_and_the_next_good_one_routed() -> None:
    nc = Published()
    router = Router(nc, "substrate.router", log_nc=nc, stream="EVENTS")  # type: ignore[arg-type]
    for raw in POISONED.values():
        await router._on_binding(ROUTE, TURN, raw)
    await router._on_speak(Msg("events.workspace.UPPER.out.speak", _turn()))  # type: ignore[arg-type]
    await router._on_binding(ROUTE, TURN, _turn())
    assert router.counters.dropped["malformed"] == len(POISONED) + 1
    assert nc.subjects == ["events.workspace.echo.in"]


def _heard_turn(device: str, text: str, level_db: float) -> bytes:
    now = datetime.now(UTC)
    turn = Turn(device, new_binding_id(), text, 0.9, (), now, now, "vad", heard=Heard(level_db))
    return turn.to_event(source=f"edge.audio.{device}", sequence_number=1).to_json()


async def test_a_turn_held_for_the_right_room_is_acked_once_its_window_settles() -> None:
    """Two boards hear one utterance: both turns wait out the window, and neither is acked
    to its consumer before then (a home killed meanwhile routes them after its restart);
    once settled, the louder is delivered, the other dropped, and both are acked."""
    nc = Published()
    router = Router(nc, "substrate.router", log_nc=nc, stream="EVENTS")  # type: ignore[arg-type]
    acked: list[str] = []

    def ack(name: str) -> Callable[[], Awaitable[None]]:
        async def done() -> None:
            acked.append(name)

        return done

    # The hall was heard lately, so the kitchen's next utterance waits for its copy.
    hall = _heard_turn("hall", "good morning", -30)
    await router._on_binding(ROUTE, "events.sensation.hall.turn", hall, ack("hall"))
    assert acked == ["hall"]
    quiet = _heard_turn("kitchen", "lights on", -35)
    loud = _heard_turn("hall", "lights on", -12)
    await router._on_binding(ROUTE, "events.sensation.kitchen.turn", quiet, ack("quiet"))
    await router._on_binding(ROUTE, "events.sensation.hall.turn", loud, ack("loud"))
    assert acked == ["hall"]
    await router.close()  # delivers what is held first
    assert sorted(acked[1:]) == ["loud", "quiet"]
    assert router.counters.dropped["heard_elsewhere"] == 1
    assert nc.subjects.count("events.workspace.echo.in") == 2


async def test_a_failure_of_ours_is_counted_as_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("a bug in routing")

    monkeypatch.setattr(router_module, "route_binding", broken)
    router = Router(Published(), "substrate.router", log_nc=Published(), stream="EVENTS")  # type: ignore[arg-type]
    await router._on_binding(ROUTE, TURN, _turn())
    assert router.counters.dropped["failed"] == 1
    assert "a bug in routing" in router.counters.last_error["failed"]


json_values = json_strategy.json_values()
GOOD = json.loads(_turn())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from([*GOOD, "x"]), json_values, max_size=6).map(
            lambda changes: json.dumps(GOOD | changes).encode()
        )
        | st.binary(max_size=200),
        min_size=1,
        max_size=5,
    )
)
# Found by this suite: a 5,000-digit integer made Event.from_json raise ValueError,
# counted as the router's own failure.
@example([_turn()[:-1] + b', "x": ' + b"9" * 5000 + b"}"])
async def test_every_fuzzed_message_is_routed_or_counted(messages: list[bytes]) -> None:
    router = Router(Published(), "substrate.router", log_nc=Published(), stream="EVENTS")  # type: ignore[arg-type]
    for raw in messages:
        with ROUTER.timed(raw):
            await router._on_binding(ROUTE, TURN, raw)
    counted = router.counters.routed + sum(router.counters.dropped.values())
    assert counted == len(messages)
    assert router.counters.dropped["failed"] == 0
