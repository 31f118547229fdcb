"""The router on a real nats-server, with a real echo node behind the binding."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import nats
import pytest
from nats.aio.subscription import Subscription
from nats.errors import TimeoutError as NatsTimeout

from home.substrate.eventlog import read_log
from home.substrate.router import Router
from home.substrate.routing import Route
from shared import control
from shared.bus_credentials import home_admin_url
from shared.errors import HomeNotRunning
from shared.event import Event
from shared.subjects import sensation_turn_subject
from tests.home.substrate.conftest import Home, running_pid, wait_for

ROUTER = "substrate.router"
WAIT_S = 10.0


def turn(text: str, **changes: Any) -> Event:
    event = Event.new("sensation.turn", {"text": text}, source="edge.audio.tui", sequence_number=1)
    return event.evolve(**changes)


async def next_event(sub: Subscription) -> Event:
    return Event.from_json((await sub.next_msg(timeout=WAIT_S)).data)


async def router_counts(home: Home) -> dict[str, Any]:
    status = await home.request(control.STATUS)
    router: dict[str, Any] = status["router"]
    return router


async def test_a_sensation_is_delivered_stamped_and_its_speak_finds_the_device(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="talk")
    await running_pid(home, "svc.echo")
    inbox = await home.nc.subscribe("events.workspace.echo.in")
    tui = await home.nc.subscribe("events.workspace.echo.out.speak.tui")
    board = await home.nc.subscribe("events.workspace.echo.out.speak.board")
    await home.nc.flush()

    sent = turn("hello")
    await home.nc.publish(sensation_turn_subject("tui"), sent.to_json())
    delivered = await next_event(inbox)
    assert delivered.event_id == sent.event_id
    assert delivered.binding_id is not None and sent.binding_id is None  # minted
    assert delivered.routed_by_schema == "talk"
    assert delivered.hops == (ROUTER,)
    assert delivered.payload == {"text": "hello"}

    # The echo node (a real process) publishes a device-less speak, as τ's nats_bus does.
    spoken = await next_event(tui)
    assert spoken.binding_id == delivered.binding_id
    assert spoken.payload == {"text": "echo: hello"}
    assert spoken.hops == ("tool.speak", ROUTER)
    assert spoken.routed_by_schema == "talk"

    # A turn that arrives with a binding_id keeps it, and a second device gets its own speak.
    await home.nc.publish(
        sensation_turn_subject("board"), turn("hi", binding_id="kept-1").to_json()
    )
    assert (await next_event(inbox)).binding_id == "kept-1"
    spoken_board = await next_event(board)
    assert spoken_board.binding_id == "kept-1"
    counts = await router_counts(home)
    assert counts["routed"] == 2 and counts["resolved_speak"] == 2


async def test_loops_expired_malformed_and_unresolved_are_dropped_and_counted(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="talk")
    await running_pid(home, "svc.echo")
    inbox = await home.nc.subscribe("events.workspace.echo.in")
    await home.nc.flush()
    subject = sensation_turn_subject("tui")

    await home.nc.publish(subject, turn("again", hops=("bridge.tui", ROUTER)).to_json())
    stale = turn("late", ttl_ms=50)
    await home.nc.publish(
        subject, stale.evolve(timestamp=stale.timestamp - timedelta(seconds=1)).to_json()
    )
    await home.nc.publish(subject, b'{"event_type": "sensation.turn"}')
    await home.nc.publish(subject, turn("x", payload={"text": "hi", "pcm": [0, 1]}).to_json())
    stray = Event.new(
        "speak", {"text": "?"}, source="agent.echo", sequence_number=1, binding_id="nobody"
    )
    await home.nc.publish("events.workspace.echo.out.speak", stray.to_json())
    marker = turn("after")
    await home.nc.publish(subject, marker.to_json())

    # Only the last, valid event gets through, and it arrives after the dropped ones were seen.
    assert (await next_event(inbox)).event_id == marker.event_id

    async def counted() -> bool:
        return (await router_counts(home))["dropped"] == {
            "looped": 1,
            "expired": 1,
            "malformed": 1,
            "refused": 1,
            "unresolved": 1,
            "failed": 0,
            "heard_elsewhere": 0,
        }

    await wait_for(counted, "one drop of each kind to be counted")
    last = (await router_counts(home))["last_error"]
    assert "already passed substrate.router" in last["looped"]
    assert "expired at" in last["expired"]
    assert "required but missing" in last["malformed"]
    assert "payload.pcm" in last["refused"] and "audio never travels" in last["refused"]
    assert "nobody" in last["unresolved"]
    with pytest.raises(NatsTimeout):
        await inbox.next_msg(timeout=0.3)


async def test_unapply_stops_routing(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="talk")
    await home.request(control.SCHEMA_UNAPPLY, name="talk")
    inbox = await home.nc.subscribe("events.workspace.echo.in")
    await home.nc.flush()
    await home.nc.publish(sensation_turn_subject("tui"), turn("anyone?").to_json())
    await home.nc.flush()
    await asyncio.sleep(0.3)
    assert inbox.pending_msgs == 0
    assert (await router_counts(home))["routed"] == 0


async def test_nats_server_killed_is_restarted_in_place_and_routing_resumes(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="talk")
    await running_pid(home, "svc.echo")
    before = {c["name"]: c for c in (await home.request(control.STATUS))["components"]}
    os.kill(before["nats-server"]["pid"], signal.SIGKILL)

    async def restarted() -> bool:
        try:
            status = await home.request(control.STATUS)
        except HomeNotRunning:  # nats-server is down: the control surface is unreachable
            return False
        nats_server = next(c for c in status["components"] if c["name"] == "nats-server")
        return nats_server["state"] == "healthy" and nats_server["restarts"] == 1

    await wait_for(restarted, "nats-server to be restarted by home up")
    after = {c["name"]: c for c in (await home.request(control.STATUS))["components"]}
    assert after["nats-server"]["address"] == before["nats-server"]["address"]
    assert after["nats-server"]["pid"] != before["nats-server"]["pid"]

    # The substrate and the echo node reconnected by themselves; a turn still goes through.
    nc = await nats.connect(home_admin_url(home.config.data_dir, after["nats-server"]["address"]))
    try:
        spoken = await nc.subscribe("events.workspace.echo.out.speak.tui")
        await nc.flush()

        async def answered() -> bool:
            await nc.publish(sensation_turn_subject("tui"), turn("still there?").to_json())
            try:
                await spoken.next_msg(timeout=0.5)
            except NatsTimeout:
                return False
            return True

        await wait_for(answered, "a turn to be routed and answered after the restart")
    finally:
        await nc.close()


async def test_a_replay_delivers_what_no_router_had_and_nothing_twice(home: Home) -> None:
    # A lost member's router delivered A, then died (here: its schema unapplied); B was
    # published while nobody routed it. The adopting member's router replays the log.
    await home.request(control.SCHEMA_APPLY, name="talk")
    await running_pid(home, "svc.echo")
    inbox = "events.workspace.echo.in"
    since = time.time() - 1
    a, b = turn("routed before the loss"), turn("published while nobody routed")
    delivered = await home.nc.subscribe(inbox)
    await home.nc.flush()
    await home.nc.publish(sensation_turn_subject("tui"), a.to_json())
    assert (await next_event(delivered)).event_id == a.event_id
    await home.request(control.SCHEMA_UNAPPLY, name="talk")
    await home.nc.publish(sensation_turn_subject("tui"), b.to_json())
    await home.nc.flush()

    adopter = Router(home.nc, "adopter.router")
    route = Route("talk", "events.sensation.*.turn", "svc.echo", inbox)
    assert await adopter.replay(home.nc, "EVENTS", [route], since) == 2
    assert adopter.counters.replayed == 2

    async def in_the_log() -> Counter[str]:
        return Counter(
            [
                logged.event.event_id
                async for logged in read_log(home.nc, "EVENTS", subject=inbox)
                if logged.event is not None
            ]
        )

    async def b_logged() -> bool:
        return b.event_id in await in_the_log()

    await wait_for(b_logged, "the replayed event in the agent's inbox")
    # A's second delivery had the same Nats-Msg-Id: the log kept one copy.
    assert await in_the_log() == Counter({a.event_id: 1, b.event_id: 1})
