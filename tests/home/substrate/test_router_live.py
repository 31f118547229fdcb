"""The router on a real nats-server, with a real echo node behind the binding."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription
from nats.errors import TimeoutError as NatsTimeout

from home.substrate import route_consumers
from home.substrate.eventlog import read_log
from home.substrate.router import Router
from home.substrate.routing import Route
from shared import control
from shared.bus_credentials import home_admin_url
from shared.errors import HomeNotRunning
from shared.event import Event
from shared.subjects import sensation_turn_subject
from tests.home.substrate.conftest import Home, running_pid, wait_for
from tests.support.home_fixtures import event_log_server

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


async def test_unapply_stops_routing_and_forgets_where_it_stood(home: Home) -> None:
    await home.request(control.SCHEMA_APPLY, name="talk")
    await home.request(control.SCHEMA_UNAPPLY, name="talk")
    inbox = await home.nc.subscribe("events.workspace.echo.in")
    await home.nc.flush()
    await home.nc.publish(sensation_turn_subject("tui"), turn("anyone?").to_json())
    await home.nc.flush()
    await asyncio.sleep(0.3)
    assert inbox.pending_msgs == 0
    assert (await router_counts(home))["routed"] == 0
    # Applied again, the schema routes from now on: not what was said while it was off.
    await home.request(control.SCHEMA_APPLY, name="talk")
    now = turn("and now?")
    await home.nc.publish(sensation_turn_subject("tui"), now.to_json())
    assert (await next_event(inbox)).event_id == now.event_id
    assert (await router_counts(home))["routed"] == 1


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


ROUTE = Route("talk", "events.sensation.*.turn", "svc.echo", "events.workspace.echo.in")


async def in_the_log(nc: NatsClient, subject: str) -> Counter[str]:
    """How often each event id stands on ``subject`` in the event log."""
    return Counter(
        [
            logged.event.event_id
            async for logged in read_log(nc, "EVENTS", subject=subject)
            if logged.event is not None
        ]
    )


async def test_a_router_goes_on_from_where_the_last_one_stopped(tmp_path: Path) -> None:
    """The first router routes A and stops (a lost member's); B and C are published while
    nobody routes; the next router (an adopter's) binds the same consumer and routes B
    and C, and not A again: the consumer's position, no clock."""
    async with event_log_server(tmp_path) as url:
        nc = await nats.connect(url)
        try:
            first = Router(nc, "m1.router", log_nc=nc, stream="EVENTS")
            await first.add_routes("talk", [ROUTE])
            a, b, c = turn("routed before the loss"), turn("while nobody"), turn("routed")
            await nc.publish(sensation_turn_subject("tui"), a.to_json())

            async def logged(*events: Event) -> bool:
                found = await in_the_log(nc, ROUTE.deliver_to or "")
                return all(event.event_id in found for event in events)

            await wait_for(lambda: logged(a), "A delivered by the first router")
            await first.close()
            for event in (b, c):
                await nc.publish(sensation_turn_subject("tui"), event.to_json())
            await nc.flush()
            adopter = Router(nc, "m2.router", log_nc=nc, stream="EVENTS")
            await adopter.add_routes("talk", [ROUTE])
            await wait_for(lambda: logged(b, c), "B and C delivered by the adopter")
            await asyncio.sleep(0.3)  # anything more would be A again
            await adopter.close()
            assert await in_the_log(nc, ROUTE.deliver_to or "") == Counter(
                {a.event_id: 1, b.event_id: 1, c.event_id: 1}
            )
            assert (first.counters.routed, adopter.counters.routed) == (1, 2)
        finally:
            await nc.close()


async def test_an_event_taken_and_never_acked_is_routed_by_the_next_router(
    tmp_path: Path,
) -> None:
    """A router that took an event and died before it routed it (here: a fetch with no
    ack) loses nothing: the consumer delivers it again to the next router once its ack
    wait has passed."""
    async with event_log_server(tmp_path) as url:
        nc = await nats.connect(url)
        try:
            await route_consumers.prepare(nc, "EVENTS", ROUTE)
            taken = turn("taken by a router that died")
            await nc.publish(sensation_turn_subject("tui"), taken.to_json())
            dying = await nc.jetstream().pull_subscribe_bind(
                route_consumers.route_durable(ROUTE), stream="EVENTS"
            )
            [msg] = await dying.fetch(1, timeout=WAIT_S)
            assert Event.from_json(msg.data).event_id == taken.event_id
            await dying.unsubscribe()
            router = Router(nc, "m2.router", log_nc=nc, stream="EVENTS")
            await router.add_routes("talk", [ROUTE])

            async def routed() -> bool:
                found = await in_the_log(nc, ROUTE.deliver_to or "")
                return taken.event_id in found

            await wait_for(routed, "the untaken event routed", route_consumers.ACK_WAIT_S + WAIT_S)
            await router.close()
            assert (router.counters.routed, router.counters.redelivered) == (1, 1)
        finally:
            await nc.close()
