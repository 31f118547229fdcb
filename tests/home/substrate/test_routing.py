"""Routing decisions: binding_id minting and preservation, stamps, hops, loop guard, expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from home.substrate.routing import (
    EXPIRED,
    LOOPED,
    UNRESOLVED,
    BindingMemory,
    BindingOrigin,
    Delivered,
    Dropped,
    RateMeter,
    Route,
    RouterCounters,
    delivery_subject,
    resolve_speak,
    route_binding,
)
from shared.event import Event, utc_now
from shared.schema.catalog import NodeSpec

ROUTER = "substrate.router"
ROUTE = Route("talk", "events.sensation.*.turn", "agent.edge_asr", "events.workspace.edge_asr.in")


def sensation(**changes: object) -> Event:
    event = Event.new(
        "sensation.turn", {"text": "hello"}, source="edge.audio.tui", sequence_number=1
    )
    return event.evolve(**changes)


def test_mints_a_binding_id_when_absent_and_stamps_the_schema() -> None:
    decision = route_binding(sensation(), ROUTE, ROUTER, utc_now())
    assert isinstance(decision, Delivered)
    assert decision.subject == "events.workspace.edge_asr.in"
    assert decision.event.binding_id is not None and len(decision.event.binding_id) == 32
    assert decision.event.routed_by_schema == "talk"
    assert decision.event.hops == (ROUTER,)
    assert decision.event.payload == {"text": "hello"}


def test_two_events_get_different_minted_binding_ids() -> None:
    first = route_binding(sensation(), ROUTE, ROUTER, utc_now())
    second = route_binding(sensation(), ROUTE, ROUTER, utc_now())
    assert isinstance(first, Delivered) and isinstance(second, Delivered)
    assert first.event.binding_id != second.event.binding_id


def test_preserves_an_existing_binding_id_and_earlier_hops() -> None:
    event = sensation(binding_id="abc123", hops=("bridge.tui",), extra={"newer_key": 1})
    decision = route_binding(event, ROUTE, ROUTER, utc_now())
    assert isinstance(decision, Delivered)
    assert decision.event.binding_id == "abc123"
    assert decision.event.hops == ("bridge.tui", ROUTER)
    assert decision.event.event_id == event.event_id
    assert decision.event.to_dict()["newer_key"] == 1


def test_loop_guard_refuses_an_event_that_already_passed_this_router() -> None:
    decision = route_binding(sensation(hops=("bridge.tui", ROUTER)), ROUTE, ROUTER, utc_now())
    assert isinstance(decision, Dropped)
    assert decision.reason == LOOPED
    assert ROUTER in decision.detail


def test_another_routers_hop_is_no_loop() -> None:
    decision = route_binding(sensation(hops=("other.router",)), ROUTE, ROUTER, utc_now())
    assert isinstance(decision, Delivered)


def test_expired_event_is_dropped() -> None:
    event = sensation(ttl_ms=1000)
    late = event.timestamp + timedelta(milliseconds=1001)
    decision = route_binding(event, ROUTE, ROUTER, late)
    assert isinstance(decision, Dropped)
    assert decision.reason == EXPIRED
    just_in_time = route_binding(
        event, ROUTE, ROUTER, event.timestamp + timedelta(milliseconds=999)
    )
    assert isinstance(just_in_time, Delivered)


def test_direct_route_is_not_delivered_by_the_router() -> None:
    with pytest.raises(ValueError, match="direct binding"):
        route_binding(sensation(), Route("s", "a.b", "n", None), ROUTER, utc_now())


def node(name: str, kind: str, subscribes: tuple[str, ...]) -> NodeSpec:
    return NodeSpec(name=name, kind=kind, runs_on="home", publishes=(), subscribes=subscribes)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (node("agent.edge_asr", "tau_agent", ()), "events.workspace.edge_asr.in"),
        (
            node("svc.echo", "service", ("x.y", "events.workspace.echo.in")),
            "events.workspace.echo.in",
        ),
        (
            node("effector.journal_append", "effector", ("events.workspace.*.out.journal_append",)),
            None,
        ),
        (node("svc.any", "service", ("events.workspace.*.in",)), None),
    ],
)
def test_delivery_subject(spec: NodeSpec, expected: str | None) -> None:
    assert delivery_subject(spec) == expected


def speak(binding_id: str | None, **changes: object) -> Event:
    event = Event.new(
        "speak",
        {"text": "hi"},
        source="agent.edge_asr",
        sequence_number=3,
        binding_id=binding_id,
        hops=("tool.speak",),
    )
    return event.evolve(**changes)


def test_deviceless_speak_goes_to_the_device_that_started_the_turn() -> None:
    memory = BindingMemory()
    memory.remember("b1", BindingOrigin("tui", "talk"))
    memory.remember("b2", BindingOrigin("board", "talk"))
    decision = resolve_speak(
        speak("b1"), "events.workspace.edge_asr.out.speak", memory, ROUTER, utc_now()
    )
    assert isinstance(decision, Delivered)
    assert decision.subject == "events.workspace.edge_asr.out.speak.tui"
    assert decision.event.binding_id == "b1"
    assert decision.event.routed_by_schema == "talk"
    assert decision.event.hops == ("tool.speak", ROUTER)
    other = resolve_speak(
        speak("b2"), "events.workspace.edge_asr.out.speak", memory, ROUTER, utc_now()
    )
    assert isinstance(other, Delivered) and other.subject.endswith(".speak.board")


@pytest.mark.parametrize("binding_id", [None, "never-seen"])
def test_deviceless_speak_without_a_known_turn_is_unresolved(binding_id: str | None) -> None:
    decision = resolve_speak(
        speak(binding_id), "events.workspace.edge_asr.out.speak", BindingMemory(), ROUTER, utc_now()
    )
    assert isinstance(decision, Dropped) and decision.reason == UNRESOLVED


def test_resolve_speak_applies_the_loop_guard_and_expiry() -> None:
    memory = BindingMemory()
    memory.remember("b1", BindingOrigin("tui", "talk"))
    subject = "events.workspace.edge_asr.out.speak"
    looped = resolve_speak(speak("b1", hops=(ROUTER,)), subject, memory, ROUTER, utc_now())
    assert isinstance(looped, Dropped) and looped.reason == LOOPED
    old = speak("b1", ttl_ms=0)
    expired = resolve_speak(old, subject, memory, ROUTER, old.timestamp + timedelta(seconds=1))
    assert isinstance(expired, Dropped) and expired.reason == EXPIRED


def test_resolve_speak_refuses_a_subject_that_already_names_a_device() -> None:
    with pytest.raises(ValueError, match="device-less"):
        resolve_speak(
            speak("b1"), "events.workspace.a.out.speak.tui", BindingMemory(), ROUTER, utc_now()
        )


def test_binding_memory_forgets_the_oldest_first() -> None:
    memory = BindingMemory(capacity=2)
    for bid in ("a", "b", "c"):
        memory.remember(bid, BindingOrigin("tui", "s"))
    assert memory.lookup("a") is None
    assert memory.lookup("c") == BindingOrigin("tui", "s")
    assert len(memory) == 2


def test_counters_and_rate() -> None:
    counters = RouterCounters()
    counters.drop(Dropped(EXPIRED, "too old"))
    counters.drop(Dropped(EXPIRED, "older"))
    assert counters.to_dict()["dropped"] == {
        "expired": 2,
        "looped": 0,
        "malformed": 0,
        "refused": 0,
        "unresolved": 0,
        "failed": 0,
        "heard_elsewhere": 0,
    }
    assert counters.last_error == {"expired": "older"}
    meter = RateMeter(window_s=10)
    for t in range(20):
        meter.mark(100.0 + t * 0.5)
    assert meter.rate(109.5) == 2.0
    assert meter.rate(200.0) == 0.0
