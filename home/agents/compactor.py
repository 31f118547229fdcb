"""The agent node's compactor: keeps each device's conversation bounded (docs/architecture.md
"Sessions").

After a turn, :meth:`Compactor.keep_bounded` measures the context τ holds for the
conversation the turn ran in and, when :class:`~home.agents.compaction.CompactionPolicy`
says so, asks τ to ``compact`` and waits for its ``compaction_end`` (read off τ's
wire by :meth:`Compactor.on_wire_event`) under the turn wall clock. What is due and
what an outcome means are decided in :mod:`home.agents.compaction` (no I/O). A
failure here is logged and counted, never the turn's. τ also compacts by itself as a
turn ends; the node waits that out before it stops τ (:meth:`Compactor.settle`), and one
that the stop still cuts short is counted as cut, not failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from home.agents.compaction import (
    CompactionOutcome,
    CompactionPolicy,
    compaction_verdict,
    context_tokens,
)
from home.agents.errors import AgentError, TauExited, TauRpcError
from home.agents.node_stats import NodeStats
from home.agents.protocol import ABORT_GRACE_S, COMPACTION_END, TURN_STILL_RUNNING, WireEvent
from home.agents.tau_process import TauProcess

log = logging.getLogger(__name__)

# How long the node waits before asking ``compact`` again while τ's last turn (or τ's
# own compaction) still holds the conversation; it asks until the turn wall clock.
COMPACT_AGAIN_S = 0.5


class Compactor:
    """Asks τ to compact a conversation grown past the policy, and counts how it went."""

    def __init__(
        self, name: str, policy: CompactionPolicy, stats: NodeStats, *, wall_clock_s: float
    ) -> None:
        self.name = name
        self.policy = policy
        self.wall_clock_s = wall_clock_s
        self._stats = stats
        self._ended: asyncio.Future[WireEvent] | None = None
        # Set while no compaction of τ's runs; cleared from its start to its end.
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False

    def on_wire_event(self, event: WireEvent) -> None:
        """Count τ's own compactions, and end the wait of the one the node asked for."""
        if event.raw.get("purpose") == "compaction":
            if event.type == "side_completion_start":
                self._idle.clear()
            elif event.type == "side_completion_end":
                self._idle.set()
                self._count(event)
        if event.type == COMPACTION_END:
            ended = self._ended
            if ended is not None and not ended.done():
                ended.set_result(event)

    async def settle(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) for a compaction in flight, before τ is stopped."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        self._stopping = True

    def _count(self, event: WireEvent) -> None:
        if not event.is_error:
            self._stats.compactions += 1
        elif self._stopping:
            self._stats.compactions_cut_at_stop += 1
            log.info("%s: the stop cut τ's compaction short: %s", self.name, event.error)
        else:
            self._stats.compaction_failures += 1
            log.warning("%s: τ could not compact: %s", self.name, event.error)

    async def keep_bounded(self, tau: TauProcess, session_id: str) -> None:
        """Compact the conversation the turn ran in once it has grown past the policy.

        After the turn's answer, before the next turn: a failure here is logged and
        counted, never the turn's (docs/architecture.md "Sessions").
        """
        try:
            tokens = await self._context_tokens(tau)
            if not self.policy.due(session_id, tokens):
                return
            outcome = await self._compact(tau)
            after = await self._context_tokens(tau)
        except AgentError as exc:
            self._stats.compactions_unperformed += 1
            log.warning("%s: could not compact conversation %s: %s", self.name, session_id, exc)
            return
        self.policy.settled(session_id, after)
        verdict = compaction_verdict(tokens, after, outcome)
        if verdict == "performed":
            log.info(
                "%s: compacted conversation %s from %d to %d tokens",
                self.name, session_id, tokens, after,
            )  # fmt: skip
        elif verdict == "tau_compacted":
            log.info(
                "%s: τ had compacted conversation %s itself, from %d to %d tokens",
                self.name, session_id, tokens, after,
            )  # fmt: skip
        else:
            self._stats.compactions_unperformed += 1
            log.warning(
                "%s: compacting conversation %s at %d tokens folded nothing%s",
                self.name, session_id, tokens,
                f": {outcome.error}" if outcome.error else "",
            )  # fmt: skip

    async def _context_tokens(self, tau: TauProcess) -> int:
        messages = (await tau.request("get_messages", {})).get("messages")
        return context_tokens(messages if isinstance(messages, list) else [])

    async def _compact(self, tau: TauProcess) -> CompactionOutcome:
        """``compact``, then wait for its ``compaction_end`` under the turn wall clock."""
        ended: asyncio.Future[WireEvent] = asyncio.get_running_loop().create_future()
        self._ended = ended
        exited: asyncio.Future[Any] = asyncio.ensure_future(tau.exited.wait())
        self._stats.compactions_asked += 1
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.wall_clock_s
            while True:
                try:
                    await tau.request("compact", {})
                    break
                except TauRpcError as exc:
                    # τ waits 5 s for the last turn to let go of the conversation, and
                    # refuses at once while its own compaction (begun as the turn
                    # ended) runs: on a loaded machine either can outlast a few tries.
                    if exc.code != TURN_STILL_RUNNING or loop.time() >= deadline:
                        return CompactionOutcome(performed=False, error=f"τ refused: {exc.message}")
                    await asyncio.sleep(COMPACT_AGAIN_S)
            done, _ = await asyncio.wait(
                {ended, exited}, timeout=self.wall_clock_s, return_when=asyncio.FIRST_COMPLETED
            )
            if ended in done:
                return CompactionOutcome.from_params(ended.result().raw)
            if exited in done:
                raise TauExited(tau.returncode, tau.stderr_tail())
            with contextlib.suppress(AgentError):
                await tau.request("abort", {}, timeout_s=ABORT_GRACE_S)
            return CompactionOutcome(
                performed=False, error=f"not over within {self.wall_clock_s:g} s, aborted"
            )
        finally:
            self._ended = None
            exited.cancel()
