"""A home spread over three members on loopback; one is SIGKILLed while turns flow.

Members m1, m2 and m3 are each a `home up` process tree with its own data
directory, ports and nats-server; the servers form a cluster and the event log
(with the agents' durable inboxes in it) is replicated on all three. m3 runs
the schema: its router and its agent. The board publishes each turn as the
bridge does, on its sensation subject, until the replicated log acknowledges
it; m3 is killed with turns queued and turns still coming. The survivor that
takes over m3's schema routes the log again from before m3's last heartbeat, so
every acknowledged turn, routed by m3 or published while nobody routed it, must
be answered exactly once within its TTL, and the log must have no gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError

from shared.event import Event, new_binding_id
from shared.subjects import sensation_turn_subject, speech_completed_subject
from tests.support.home_cluster import (
    AGENT,
    home_cluster,
    start_member,
    wait_for,
    write_turns_schema,
)
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow

DEVICE = "hall"
TURNS_BEFORE, TURNS_DURING, TURNS_AFTER = 4, 8, 4
INTERVAL_S = 0.4
TTL_MS = 90_000


def answer(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": f"heard {request.last_user_text[-20:]}"})


class Board:
    """Publishes turns on its sensation subject, as the bridge does; acks each speak."""

    def __init__(self, nc: NatsClient) -> None:
        self.nc = nc
        self.acked: dict[str, float] = {}  # binding_id -> deadline (monotonic)
        self.log_seqs: dict[str, int] = {}
        self.answers: Counter[str] = Counter()
        self.sequence = 0

    async def listen(self) -> None:
        await self.nc.subscribe(f"events.workspace.edge_asr.out.*.{DEVICE}", cb=self._answer)
        await self.nc.flush()

    async def _answer(self, msg: Msg) -> None:
        event = Event.from_json(msg.data)
        if event.binding_id is None or ".speak." not in msg.subject:
            return
        if event.binding_id in self.acked and time.monotonic() <= self.acked[event.binding_id]:
            self.answers[event.binding_id] += 1
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
        assert event.binding_id is not None
        self.acked[event.binding_id] = started + TTL_MS / 1000
        self.log_seqs[event.binding_id] = ack.seq

    async def all_answered_once(self) -> None:
        """Every acknowledged turn answered within its TTL, and none twice."""
        async with asyncio.timeout(TTL_MS / 1000):
            while set(self.answers) != set(self.acked):
                await asyncio.sleep(0.5)
        await asyncio.sleep(3)  # a second answer would come now
        assert all(count == 1 for count in self.answers.values()), self.answers

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


async def test_a_lost_member_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    schemas = write_turns_schema(tmp_path / "schemas")
    async with (
        ScriptedModel(responder=answer) as model,
        home_cluster(
            tmp_path,
            model.url,
            {"m3": ["cluster_turns"]},
            extra_args=["--schema-dir", str(schemas)],
        ) as (m1, m2, m3),
    ):
        status = await m1.status()
        assert status is not None
        where = {m["member"]: [n["name"] for n in m["nodes"]] for m in status["cluster"]["members"]}
        assert where == {"m1": [], "m2": [], "m3": [AGENT]}, where
        nc = await nats.connect(m1.admin_url())
        try:
            info = await nc.jetstream().stream_info("EVENTS")
            assert info.config.num_replicas == 3
            board = Board(nc)
            await board.listen()
            await board.send_many(TURNS_BEFORE, "before")
            during = asyncio.create_task(board.send_many(TURNS_DURING, "during"))
            await asyncio.sleep(INTERVAL_S * 2)
            m3.kill()
            await during
            await wait_for([m1, m2], alive=2)
            await board.send_many(TURNS_AFTER, "after")
            await board.all_answered_once()
            assert len(board.acked) == TURNS_BEFORE + TURNS_DURING + TURNS_AFTER
            status = await m2.status()
            assert status is not None
            cluster = status["cluster"]
            assert [m["member"] for m in cluster["members"] if m["alive"]] == ["m1", "m2"]
            runs = {m["member"] for m in cluster["members"] if AGENT in str(m["nodes"])}
            assert runs == {"m1"}, cluster
            await board.log_is_whole()
            # m3 comes back: it restores its schema, sees m1 runs it, and gives it up.
            await start_member(m3, model.url, [m1], ["--schema-dir", str(schemas)])
            await wait_for([m3, m1], alive=3)
            status = await m3.status()
            assert status is not None and status["schemas"] == [], status
            runs = {m["member"] for m in status["cluster"]["members"] if AGENT in str(m["nodes"])}
            assert runs == {"m1"}, status["cluster"]
            await board.send("back again")
            await board.all_answered_once()
        finally:
            await nc.close()
    assert any("before 0" in r.last_user_text for r in model.requests)
