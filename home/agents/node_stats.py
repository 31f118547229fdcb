"""What an agent node counts: how each turn ended, and every refusal and failure.

The node's parts (:mod:`home.agents.turn_runner`, :mod:`home.agents.output_watch`,
:mod:`home.agents.delegation_desk`, ...) count into one :class:`NodeStats`, which a
supervisor or a test reads as ``node.stats``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from nats.aio.msg import Msg

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnOutcome:
    """How one prompt ended."""

    binding_id: str
    submission_id: str
    end_reason: str
    reprompt: bool
    error: str | None
    elapsed_s: float
    # Monotonic instants: the event arrived, the prompt was written to τ, agent_end came.
    received_at: float = 0.0
    prompted_at: float = 0.0
    ended_at: float = 0.0
    # Time spent moving τ onto the device's conversation (0 when it was already on it).
    switch_s: float = 0.0
    switched: bool = False


@dataclass
class NodeStats:
    """Counters a supervisor or a test reads; every refusal and failure is counted here."""

    received: int = 0
    duplicates: int = 0
    invalid: int = 0
    stale: int = 0
    prompts: int = 0
    completed: int = 0
    aborted: int = 0
    failed: int = 0
    redelivered: int = 0
    reprompts: int = 0
    restarts: int = 0
    busy_retries: int = 0
    dropped_at_stop: int = 0
    compactions: int = 0
    compaction_failures: int = 0
    # τ's own compactions that the node's stop cut short after waiting for them.
    compactions_cut_at_stop: int = 0
    # Compactions the node asked for to keep a conversation bounded, and those that
    # folded nothing, failed or timed out (home/agents/compaction.py).
    compactions_asked: int = 0
    compactions_unperformed: int = 0
    # Moves onto a device's conversation, conversations started, and turns that ran
    # without theirs because the store could not give it (docs/architecture.md "Sessions").
    session_switches: int = 0
    sessions_created: int = 0
    session_failures: int = 0
    # Turns whose speech the device never acknowledged (the device is then served last).
    unacked_speech: int = 0
    # Turns stopped because their device did not listen while another device's turn waited.
    yielded: int = 0
    # Delegated tasks refused (this agent cannot answer them, or they came too late).
    delegations_refused: int = 0
    # Tasks this agent delegated whose answer did not come within its delegate_timeout_s.
    delegations_timed_out: int = 0
    # Inbound or own-output messages a handler failed on unexpectedly (logged, then skipped).
    internal_errors: int = 0
    outcomes: list[TurnOutcome] = field(default_factory=list)

    def internal_error(self, node: str, handler: str, msg: Msg, exc: Exception) -> None:
        """A bug of ours met by outside input: counted and logged in one line, then skipped."""
        self.internal_errors += 1
        log.error(
            "%s: %s handler failed on %s (%d bytes): %r",
            node, handler, msg.subject, len(msg.data), exc,
        )  # fmt: skip
