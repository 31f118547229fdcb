"""A board whose outbox cannot be written: the producer is told, nothing taken is lost.

The edge half's outbox lives on a small real filesystem (tests/support/small_fs.py),
filled to the last byte, then freed, then turned read-only as a failing disk does.
Each event the outbox cannot commit is refused to its producer naming the file (the
edge's handover turns that into the spoken notice, edge/notice.py), health names the
fault, every event taken before still reaches home exactly once, and the half takes
events again once there is room.
"""

from __future__ import annotations

from pathlib import Path

from bridge.node.intake import REFUSED
from bridge.node.outbox import store_path
from edge.errors import NotTaken
from edge.handover import hand_to_bridge
from shared.event import Event
from tests.bridge.servers import Collector, Paired, running_bridge, wait_until
from tests.support.small_fs import small_filesystem

UP = "events.sensation.board.turn"
SIZE_KIB = 1024
# Events asked while full, at most, before one is refused: SQLite may still fit a few
# in pages its WAL file already holds.
MAX_ASKED_WHILE_FULL = 200


def turn(i: int) -> Event:
    return Event.new(
        "sensation.turn",
        {"text": f"turn {i} " + "x" * 200},
        source="edge.asr",
        sequence_number=i,
        ttl_ms=60_000,
    )


async def test_an_outbox_that_cannot_commit_refuses_naming_the_file_and_loses_nothing_taken(
    paired: Paired, home_nats: str, edge_nats: str, tmp_path: Path
) -> None:
    with small_filesystem(tmp_path / "outbox", SIZE_KIB, can_fail=True) as small:
        async with running_bridge(paired, home_nats, edge_nats, edge_outbox=small.path) as rig:
            at_home = Collector()
            await rig.home_nc.subscribe(UP, cb=at_home.cb)
            await rig.home_nc.flush()
            await wait_until(lambda: rig.edge.health()["ok"], what="link up")
            outbox_file = str(store_path(small.path, paired.edge))
            taken: list[str] = []
            refused: list[NotTaken] = []

            async def ask(i: int) -> None:
                event = turn(i)
                try:
                    await hand_to_bridge(rig.edge_nc, UP, event)
                except NotTaken as exc:
                    refused.append(exc)
                else:
                    taken.append(event.event_id)

            for i in range(5):
                await ask(i)
            assert len(taken) == 5 and not refused

            small.fill()
            for i in range(5, 5 + MAX_ASKED_WHILE_FULL):
                await ask(i)
                if refused:
                    break
            (full,) = refused
            assert full.verdict == REFUSED
            assert "unstored" in full.reason and outbox_file in full.reason
            health = rig.edge.health()
            assert not health["ok"] and outbox_file in health["store_fault"]
            assert health["counters"]["refused"]["unstored"] == 1
            # The next good event is answered too, and refused the same way while full.
            await ask(10_000)
            assert len(refused) == 2

            small.free()
            before = len(taken)
            await ask(10_001)
            assert len(taken) == before + 1 and len(refused) == 2
            assert rig.edge.health()["store_fault"] is None

            # Everything taken so far reaches home.
            await wait_until(lambda: len(at_home.msgs) == len(taken), what="every taken turn")

            small.turn_read_only()  # a failing disk, under the open outbox file
            await ask(20_000)
            # SQLite calls a write the disk refuses a "disk I/O error"; the file is named.
            assert len(refused) == 3 and outbox_file in refused[-1].reason
            assert outbox_file in rig.edge.health()["store_fault"]
            assert not rig.edge.health()["ok"]

            # Everything taken reached home, once; nothing refused did.
            await ask(20_001)  # refused as well: only an unmount brings the disk back
            assert len(refused) == 4
            arrived = [event.event_id for event in at_home.events()]
            assert sorted(arrived) == sorted(taken)
            assert not {exc.event_id for exc in refused} & set(arrived)
