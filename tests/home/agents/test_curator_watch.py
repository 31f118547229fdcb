"""The curator's watch at its boundary: a report wakes a pass over the root it names, and
anything that is not a memorize report is refused, counted and never raised."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from home.agents.curator_watch import CuratorWatch, Wake, curates, report_subjects
from home.jmfts.testing import RunningJmfts, running_jmfts
from home.memory.memories import MemoryStore
from shared.event import Event
from shared.messages.memory import MemorizeReport
from shared.schema.catalog import NodeSpec

AGENT = "edge_asr_memory"
ROOT = f"workspace/{AGENT}"
SPEC = NodeSpec(
    name="agent.memory_curator",
    kind="tau_agent",
    runs_on="home",
    publishes=("events.workspace.memory_curator.out.>",),
    subscribes=(
        "events.workspace.memory_curator.in",
        f"events.workspace.{AGENT}.out.memorize.*",
    ),
    config={"curator": True, "curate_every_s": 3600},
    memory_writes=(ROOT,),
)


@dataclass
class Delivered:
    """What the watch reads of a NATS message."""

    subject: str
    data: bytes


def report_event(root: str = ROOT, deposited: tuple[int, ...] = (1,)) -> bytes:
    report = MemorizeReport(
        evaluation_id="e1", status="deposited", memory_root=root, document_ids=deposited
    )
    event = report.to_event(source=f"agent.{AGENT}", sequence_number=1, binding_id="b" * 32)
    return event.to_json()


@pytest.fixture
async def jmfts(tmp_path: Path) -> AsyncIterator[RunningJmfts]:
    async with running_jmfts(tmp_path / "jmfts") as server:
        yield server


def test_a_curator_is_named_by_its_config_and_woken_by_the_report_rails_it_reads() -> None:
    assert curates(SPEC)
    assert not curates(replace(SPEC, config={}))
    assert report_subjects(SPEC) == [f"events.workspace.{AGENT}.out.memorize.*"]


async def test_a_report_wakes_a_pass_and_hostile_input_is_counted_not_raised(
    jmfts: RunningJmfts, tmp_path: Path
) -> None:
    token = await jmfts.principal("memory_curator", [ROOT])
    said = await jmfts.write(ROOT, "The user's cat is called Miso.", usetype="memory:person")
    again = await jmfts.write(ROOT, "the user's cat is called miso", usetype="memory:person")
    watch = CuratorWatch(SPEC, MemoryStore(jmfts.url, token=token), tmp_path)
    try:
        subject = f"events.workspace.{AGENT}.out.memorize.kitchen"
        hostile = [
            b"{not json",
            b"[]",
            Event.new("speak", {"text": "hi"}, source="x", sequence_number=1).to_json(),
            b'{"event_type": "memory.memorize", "payload": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            report_event().replace(b'"status"', b'"status_"'),
        ]
        for data in hostile:
            await watch.on_report(Delivered(subject, data))  # type: ignore[arg-type]
        assert watch.counts.refused == len(hostile) and watch._queue.empty()
        # A report that deposited nothing wakes nothing: nothing new to curate.
        await watch.on_report(Delivered(subject, report_event(deposited=())))  # type: ignore[arg-type]
        assert watch.counts.quiet == 1 and watch._queue.empty()
        await watch.on_report(Delivered(subject, report_event()))  # type: ignore[arg-type]
        wake = watch._queue.get_nowait()
        assert wake == Wake(ROOT, AGENT, "b" * 32, None)
        (merge,) = await watch.curate(wake)
        assert (merge.kept, merge.merged) == (said, again)
        # A root it was not granted: a failure counted, nothing raised, nothing written.
        assert await watch.curate(Wake("workspace/other", "other")) == []
        assert watch.counts.failures == 1 and watch.counts.passes == 2
        assert watch.scheduled() == [Wake(ROOT, AGENT)]
    finally:
        await watch.close()
