"""A home spread over three members on loopback; one is SIGKILLed while turns flow.

Members m1, m2 and m3 are each a `home up` process tree with its own data
directory, ports and nats-server; the servers form a cluster and the event log
(with the agents' durable inboxes in it) is replicated on all three. m3 runs
the schema: its router and its agent. The board publishes each turn as the
bridge does, on its sensation subject, until the replicated log acknowledges
it; m3 is killed with turns queued and turns still coming. The survivor that
takes over m3's schema routes its binding on from where m3's router left its
durable consumer on the log (replicated with the log), so every acknowledged turn,
routed by m3 or published while nobody routed it, must be answered exactly once
within its TTL, and the log must have no gap.

m3 dies with a turn in flight: the scripted model holds its answer to one turn
until m3 is killed, so that turn was taken by m3's agent and never answered there.
The board counts every answer it hears from the moment it first publishes a turn,
before the log acknowledges it, so a second answer cannot hide behind a late ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError

from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speech_completed_subject
from tests.support.home_cluster import (
    AGENT,
    Member,
    descendants,
    start_member,
    turns_args,
    turns_cluster,
    wait_for,
)
from tests.support.scripted_model import RecordedRequest, Reply

pytestmark = pytest.mark.slow

DEVICE = "hall"
TURNS_BEFORE, TURNS_DURING, TURNS_AFTER = 4, 8, 4
INTERVAL_S = 0.4
TTL_MS = 90_000


HELD = "during 2"


class HeldTurn:
    """The scripted model's answers: the first time it is asked about :data:`HELD`, it
    holds that answer until :attr:`released` (the member asking is killed meanwhile);
    every other ask is answered at once."""

    def __init__(self) -> None:
        self.asked = 0
        self.in_flight = asyncio.Event()
        self.released = asyncio.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        text = request.last_user_text
        reply = Reply.call("speak", {"text": f"heard {text[-20:]}"})
        if HELD not in text:
            return reply
        self.asked += 1
        if self.asked > 1:
            return reply
        self.in_flight.set()
        return Reply.call("speak", {"text": f"heard {text[-20:]}"}, gate=self.released)


class Board:
    """Publishes turns on its sensation subject, as the bridge does; acks each speak."""

    def __init__(self, nc: NatsClient) -> None:
        self.nc = nc
        self.sent: dict[str, float] = {}  # binding_id -> deadline (monotonic), from first publish
        self.acked: set[str] = set()
        self.log_seqs: dict[str, int] = {}
        self.answers: Counter[str] = Counter()  # every answer heard, in time or not
        self.late: Counter[str] = Counter()  # answers heard after the turn's deadline
        self.sequence = 0

    async def listen(self) -> None:
        await self.nc.subscribe(f"events.workspace.edge_asr.out.*.{DEVICE}", cb=self._answer)
        await self.nc.flush()

    async def _answer(self, msg: Msg) -> None:
        event = Event.from_json(msg.data)
        if event.binding_id is None or ".speak." not in msg.subject:
            return
        deadline = self.sent.get(event.binding_id)
        if deadline is not None:
            self.answers[event.binding_id] += 1
            if time.monotonic() > deadline:
                self.late[event.binding_id] += 1
        ack = Event.new(
            "speech.completed", {"ok": True, "device": DEVICE}, source=f"edge.audio.{DEVICE}",
            sequence_number=1, binding_id=event.binding_id,
        )  # fmt: skip
        with contextlib.suppress(NatsError):
            await self.nc.publish(speech_completed_subject(event.binding_id), ack.to_json())

    async def send(self, text: str) -> None:
        """One turn, published until the replicated log acknowledges it (same msg id)."""
        self.sequence += 1
        event = Event.new(
            "sensation.turn", {"text": text, "device": DEVICE}, source=f"edge.audio.{DEVICE}",
            sequence_number=self.sequence, ttl_ms=TTL_MS, binding_id=new_binding_id(),
        )  # fmt: skip
        js = self.nc.jetstream()
        started = time.monotonic()
        assert event.binding_id is not None
        self.sent[event.binding_id] = started + TTL_MS / 1000  # answers count from here on
        while True:
            try:
                ack = await js.publish(
                    sensation_turn_subject(DEVICE),
                    event.to_json(),
                    timeout=2,
                    headers={"Nats-Msg-Id": event.event_id},
                )
                break
            except (NatsError, TimeoutError):
                # Not acknowledged: the log's leader was on the lost member; it is elected again.
                assert time.monotonic() - started < 30, "the log took no turn for 30 s"
                await asyncio.sleep(0.2)
        self.acked.add(event.binding_id)
        self.log_seqs[event.binding_id] = ack.seq

    async def all_answered_once(self) -> None:
        """Every turn sent was acknowledged and answered within its TTL, and none twice."""
        assert self.acked == set(self.sent)
        try:
            async with asyncio.timeout(TTL_MS / 1000):
                while set(self.answers) != self.acked:
                    await asyncio.sleep(0.5)
        except TimeoutError:
            unanswered = sorted(self.acked - set(self.answers))
            raise AssertionError(f"acknowledged, never answered: {unanswered}") from None
        await asyncio.sleep(3)  # a second answer would come now
        twice = {b: n for b, n in self.answers.items() if n != 1}
        assert not twice, twice
        assert not self.late, self.late

    async def log_is_whole(self) -> None:
        """Every acknowledged turn is in the event log, and no sequence is missing."""
        js = self.nc.jetstream()
        state = (await js.stream_info("EVENTS")).state
        assert state.num_deleted in (0, None)
        assert state.messages == state.last_seq - state.first_seq + 1
        for seq in self.log_seqs.values():
            assert (await js.get_msg("EVENTS", seq)).subject == sensation_turn_subject(DEVICE)

    async def send_many(self, count: int, label: str) -> None:
        for i in range(count):
            await self.send(f"{label} {i}")
            await asyncio.sleep(INTERVAL_S)


async def gives_up_its_schema(member: Member, within_s: float = 60.0) -> None:
    """Until ``member``, back after being lost, runs no schema and sees m1 run the agent
    (it restores its schema at start, then finds m1 runs it and stops its own)."""
    status = None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within_s):
            while True:
                status = await member.status()
                if status and status["schemas"] == [] and runs_agent(status) == {"m1"}:
                    return
                await asyncio.sleep(0.5)
    raise AssertionError(f"{member.name} did not give its schema up: {status}")


def runs_agent(status: dict[str, Any]) -> set[str]:
    """The members whose nodes include the agent."""
    return {m["member"] for m in status["cluster"]["members"] if AGENT in str(m["nodes"])}


async def test_a_lost_member_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    held = HeldTurn()
    async with turns_cluster(tmp_path, held) as (model, (m1, m2, m3)):
        status = await m1.status()
        assert status is not None
        where = {m["member"]: [n["name"] for n in m["nodes"]] for m in status["cluster"]["members"]}
        assert where == {"m1": [], "m2": [], "m3": [AGENT]}, where
        nc = await nats.connect(m1.admin_url())
        try:
            info = await nc.jetstream().stream_info("EVENTS")
            assert info.config.num_replicas == 3
            # Where m3's routing stands is replicated with the log: the adopter goes on there.
            routes = [
                c
                for c in await nc.jetstream().consumers_info("EVENTS")
                if c.name.startswith("route_")
            ]
            assert routes and all(
                c.cluster is not None and len(c.cluster.replicas or []) == 2 for c in routes
            ), routes
            board = Board(nc)
            await board.listen()
            await board.send_many(TURNS_BEFORE, "before")
            during = asyncio.create_task(board.send_many(TURNS_DURING, "during"))
            # m3's agent has taken the held turn and asked the model: kill m3 now.
            async with asyncio.timeout(60):
                await held.in_flight.wait()
            m3.kill()
            held.released.set()
            await during
            await wait_for([m1, m2], alive=2)
            await board.send_many(TURNS_AFTER, "after")
            await board.all_answered_once()
            assert len(board.acked) == TURNS_BEFORE + TURNS_DURING + TURNS_AFTER
            # The turn in flight on m3 was asked again on the member that took over.
            assert held.asked >= 2, held.asked
            status = await m2.status()
            assert status is not None
            cluster = status["cluster"]
            assert [m["member"] for m in cluster["members"] if m["alive"]] == ["m1", "m2"]
            assert runs_agent(status) == {"m1"}, cluster
            await board.log_is_whole()
            # m3 comes back: it restores its schema, sees m1 runs it, and gives it up.
            await start_member(m3, model.url, [m1], turns_args(tmp_path))
            await wait_for([m3, m1], alive=3)
            await gives_up_its_schema(m3)
            await board.send("back again")
            await board.all_answered_once()
        finally:
            await nc.close()
    assert any("before 0" in r.last_user_text for r in model.requests)


async def test_a_member_that_stalls_gives_its_schema_to_the_member_that_took_it(
    tmp_path: Path,
) -> None:
    """m3 stops (SIGSTOP) past the time a member is taken for lost, and m1 takes its
    schema over; when m3 wakes, its record is gone, so it gives the schema up: one agent
    reads the inbox, and a turn is answered once."""
    async with turns_cluster(tmp_path, HeldTurn()) as (_model, (m1, _m2, m3)):
        assert m3.proc is not None
        m3.proc.send_signal(signal.SIGSTOP)
        try:
            async with asyncio.timeout(60):
                while (await m1.status() or {}).get("cluster", {}).get("adopted") != {"m3": "m1"}:
                    await asyncio.sleep(0.5)
        finally:
            m3.proc.send_signal(signal.SIGCONT)
        await gives_up_its_schema(m3)
        status = await m1.status()
        assert status is not None and runs_agent(status) == {"m1"}, status
        nc = await nats.connect(m1.admin_url())
        try:
            board = Board(nc)
            await board.listen()
            await board.send("after the stall")
            await board.all_answered_once()
        finally:
            await nc.close()


def nats_server_pids(member: Member) -> list[int]:
    """The pids of ``member``'s own nats-servers (children of its ``home up``)."""
    assert member.proc is not None
    found = []
    for pid in descendants(member.proc.pid):
        with contextlib.suppress(OSError):
            if b"nats-server" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                found.append(pid)
    return found


def nats_server_pid(member: Member) -> int:
    """The pid of ``member``'s own nats-server."""
    pids = nats_server_pids(member)
    assert len(pids) == 1, f"{member.name} runs nats-servers {pids}"
    return pids[0]


@contextlib.asynccontextmanager
async def cut_off(member: Member) -> AsyncIterator[None]:
    """Keep ``member``'s nats-server paused (SIGSTOP) while the block runs, and each one
    its supervision starts in its place too: the member stays cut off however soon it
    replaces a server that stopped answering. Every paused server goes on afterwards."""
    paused: set[int] = set()

    async def pause_each() -> None:
        while True:
            for pid in set(nats_server_pids(member)) - paused:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                paused.add(pid)
            await asyncio.sleep(0.05)

    pausing = asyncio.create_task(pause_each())
    try:
        while not paused:
            await asyncio.sleep(0.01)
        yield
    finally:
        pausing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pausing
        for pid in paused:
            with contextlib.suppress(ProcessLookupError):  # replaced by its member
                os.kill(pid, signal.SIGCONT)


def logged(member: Member, starting: str) -> list[tuple[datetime, str]]:
    """When ``member``'s ``home up`` logged each message that starts with ``starting``."""
    found = []
    for line in member.log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            record = json.loads(line)
            if str(record["message"]).startswith(starting):
                found.append((datetime.fromisoformat(record["time"]), str(record["message"])))
    return found


async def test_a_member_cut_off_stops_its_agent_before_another_takes_it_over(
    tmp_path: Path,
) -> None:
    """m3's nats-server pauses (SIGSTOP), and each one m3's supervision starts in its
    place, with a turn in flight on m3's agent, until m1 takes m3 for lost. m3 cannot
    renew its record, so it kills its agent and stops its schema (it is fenced) before m1
    may take the schema over; once its servers go on, it finds its record claimed and
    does not start the schema again: from m1's takeover on, m3's agent never runs, and
    every turn is answered once. (A server left to come back sooner lets m3 renew in time,
    and then nobody takes it over: that is the other test below.)"""
    held = HeldTurn()
    async with turns_cluster(tmp_path, held) as (_model, (m1, _m2, m3)):
        nc = await nats.connect(m1.admin_url())
        # m1 does not send its clients the other members' addresses (their passwords
        # are not m1's): a reconnect stays with m1.
        assert nc.discovered_servers == []
        try:
            board = Board(nc)
            await board.listen()
            await board.send_many(2, "before")
            during = asyncio.create_task(board.send_many(TURNS_DURING, "during"))
            async with asyncio.timeout(60):
                await held.in_flight.wait()
            async with cut_off(m3), asyncio.timeout(60):
                while (await m1.status() or {}).get("cluster", {}).get("adopted") != {"m3": "m1"}:
                    await asyncio.sleep(0.5)
            held.released.set()
            await during
            await gives_up_its_schema(m3)
            await board.send_many(2, "after")
            await board.all_answered_once()
        finally:
            await nc.close()
    [(took_over, _)] = logged(m1, "membership: member m3 is gone")
    states = logged(m3, f"node {AGENT}: ")
    before = [message for at, message in states if at < took_over]
    after = [message for at, message in states if at >= took_over]
    # Stopped before m1 took over (not starting, not running, not backing off to restart),
    # and never started again on m3.
    assert before and before[-1].endswith(": stopped "), before[-3:]
    assert all(message.endswith(": stopped ") for message in after), after
    assert logged(m3, "membership: fenced"), "m3 never said it was fenced"


async def test_a_fenced_member_that_renews_in_time_runs_its_schema_again(tmp_path: Path) -> None:
    """m1's and m2's nats-servers pause (SIGSTOP) until m3, which runs the schema, fences
    itself: with no quorum it cannot renew its record. Nobody can take the schema over
    meanwhile; once the servers wake and m3 renews its record, m3 runs its schema again,
    and the next turn is answered once."""
    async with turns_cluster(tmp_path, HeldTurn()) as (_model, (m1, m2, m3)):
        servers = [nats_server_pid(member) for member in (m1, m2)]
        for server in servers:
            os.kill(server, signal.SIGSTOP)
        try:
            async with asyncio.timeout(60):
                while not logged(m3, "membership: fenced"):
                    await asyncio.sleep(0.2)
        finally:
            for server in servers:
                with contextlib.suppress(ProcessLookupError):  # restarted by its member
                    os.kill(server, signal.SIGCONT)
        status = None
        async with asyncio.timeout(120):
            while not (status and status["schemas"] and runs_agent(status) == {"m3"}):
                await asyncio.sleep(0.5)
                status = await m3.status()
        await wait_for([m3, m1, m2], alive=3)
        assert logged(m3, "membership: the record is renewed")
        for member in (m1, m2, m3):
            status = await member.status()
            assert status is not None and not status["cluster"]["adopted"], status["cluster"]
        nc = await nats.connect(m3.admin_url())
        try:
            board = Board(nc)
            await board.listen()
            await board.send("after the fence")
            await board.all_answered_once()
        finally:
            await nc.close()
