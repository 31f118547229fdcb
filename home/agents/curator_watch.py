"""The curator's watch: what wakes ``agent.memory_curator``, and its passes, off the turn.

Reports are for monitors and never bound into a node (``shared/schema/activation.py``),
so the curator reads the memorize report rail of the agents it curates as a monitor: its
catalog entry subscribes to ``events.workspace.<agent>.out.memorize.*``, and each report
that deposited something wakes one pass of :class:`home.memory.curator.Curator` over
the memory root it names,
under the curator's own principal (``home up`` grants it write on the roots its catalog
entry names in ``memory_writes``; any other answers 404, logged and counted, and nothing
is written). Every ``curate_every_s`` (its node config; 0: never) it also passes over
every ``workspace/<agent>`` root in ``memory_writes``, so a report missed while it was
down costs nothing: each pass reads every memory new since the last (its watermark).

Passes run one at a time on one worker; a report that does not parse is counted and
logged, never raised into the subscription. What a pass changed is in the store, as
retractions with the curator's provenance (the turn whose report woke it): ``home
memory show`` and ``home timeline`` (**merged**, **resolved**) tell it. See docs/architecture.md
"Memory".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from home.jmfts.errors import JmftsError
from home.memory.curator import Curator, Merge, Watermarks
from home.memory.memories import MemoryStore
from shared.errors import ContractError, SubjectError
from shared.event import EnvelopeLimits, Event
from shared.messages.memory import MemorizeReport
from shared.schema import NodeSpec
from shared.subjects import parse_subject

log = logging.getLogger(__name__)
WATERMARKS_FILE = "curator.json"
#: Waiting reports beyond this are dropped (counted): the next pass reads them anyway.
QUEUE_LIMIT = 100


def curates(spec: NodeSpec) -> bool:
    """Whether ``spec``'s node is a curator (its config says ``curator: true``)."""
    return spec.agent is not None and spec.config.get("curator") is True


def report_subjects(spec: NodeSpec) -> list[str]:
    """The memorize report rails ``spec`` subscribes to (the agents it is woken by)."""
    found = []
    for pattern in spec.subscribes:
        try:
            if parse_subject(pattern.replace("*", "x")).kind == "memorize":
                found.append(pattern)
        except SubjectError:
            continue
    return found


@dataclass(frozen=True)
class Wake:
    """One pass asked for: the root, whose memories they are, and the turn that woke it."""

    root: str
    agent: str
    binding_id: str | None = None
    schema: str | None = None


@dataclass
class CuratorCounts:
    """What the watch did: reports read (and of them, those that deposited nothing, refused
    or dropped), passes, failed passes, and the memories merged or resolved."""

    reports: int = 0
    quiet: int = 0
    refused: int = 0
    dropped: int = 0
    passes: int = 0
    failures: int = 0
    merged: int = 0


class CuratorWatch:
    """Wakes the curator on reports and on its cadence; one pass at a time."""

    def __init__(self, spec: NodeSpec, store: MemoryStore, run_dir: Path) -> None:
        self.spec = spec
        self.store = store
        self.curator = Curator(store, spec.name, Watermarks(run_dir / WATERMARKS_FILE))
        every = spec.config.get("curate_every_s", 0)
        self.every_s = float(every) if isinstance(every, int | float) and every > 0 else None
        self.counts = CuratorCounts()
        self._queue: asyncio.Queue[Wake] = asyncio.Queue(QUEUE_LIMIT)
        self._subs: list[Subscription] = []
        self._worker: asyncio.Task[None] | None = None
        self.limits = EnvelopeLimits()

    async def start(self, nc: NatsClient) -> None:
        """Subscribe to the report rails and start the worker."""
        for subject in report_subjects(self.spec):
            self._subs.append(await nc.subscribe(subject, cb=self.on_report))
        self._worker = asyncio.create_task(self._work(), name=f"{self.spec.name}-curator")

    async def on_report(self, msg: Msg) -> None:
        """A memorize report that deposited something: a pass over its root, queued (never
        raised, never blocking)."""
        self.counts.reports += 1
        try:
            event = Event.from_json(msg.data, self.limits)
            report = MemorizeReport.from_event(event)
        except ContractError as exc:
            self.counts.refused += 1
            log.warning("%s: report on %s refused: %s", self.spec.name, msg.subject, exc)
            return
        if not report.document_ids:
            self.counts.quiet += 1  # nothing deposited: nothing new to curate
            return
        agent = report.agent or report.memory_root.rsplit("/", 1)[-1]
        wake = Wake(report.memory_root, agent, event.binding_id, event.produced_by_schema)
        try:
            self._queue.put_nowait(wake)
        except asyncio.QueueFull:
            self.counts.dropped += 1
            log.warning("%s: %d passes waiting; %s left to the next", self.spec.name,
                        QUEUE_LIMIT, wake.root)  # fmt: skip

    def scheduled(self) -> list[Wake]:
        """The passes the cadence asks for: every workspace root in ``memory_writes``."""
        return [
            Wake(root, root.split("/", 1)[1])
            for root in self.spec.memory_writes
            if root.startswith("workspace/") and root.count("/") == 1
        ]

    async def _work(self) -> None:
        while True:
            try:
                wakes = [await asyncio.wait_for(self._queue.get(), self.every_s)]
            except TimeoutError:
                wakes = self.scheduled()
            for wake in wakes:
                await self.curate(wake)

    async def curate(self, wake: Wake) -> list[Merge]:
        """One pass; a JMFTS failure is counted and logged, and the next pass tries again."""
        self.counts.passes += 1
        try:
            merged = await self.curator.curate(
                wake.root, wake.agent, binding_id=wake.binding_id, schema=wake.schema
            )
        except JmftsError as exc:
            self.counts.failures += 1
            log.warning("%s: curating %s failed: %s", self.spec.name, wake.root, exc)
            return []
        self.counts.merged += len(merged)
        return merged

    async def close(self) -> None:
        """Stop the worker, unsubscribe, close the memory client."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        await self.store.close()
