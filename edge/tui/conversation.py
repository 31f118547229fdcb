"""What the screen shows, as data: turns by ``binding_id`` and the status bar (pure).

Times are ``time.monotonic()`` seconds handed in by the caller, so the model is
deterministic under test. An answer whose ``binding_id`` names no turn typed here
(another session's, or an agent speaking on its own) gets a turn of its own with
no typed text, so nothing that arrives is ever hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edge.tui.link import LinkStatus
from edge.tui.wire import AgentReply, Incoming, MemoryReport
from edge.wire import SpeakRequest

Answer = SpeakRequest | AgentReply


@dataclass
class TurnRecord:
    """One typed line and everything home sent back under its ``binding_id``."""

    binding_id: str | None
    text: str | None
    sent_at: float | None
    answers: list[Answer] = field(default_factory=list)
    notes: list[MemoryReport] = field(default_factory=list)
    first_answer_at: float | None = None
    # Typed while home was unreachable: it waits in a queue (NATS's or the bridge's outbox).
    sent_while_down: bool = False
    # Why the bridge half did not take the line (home never hears it), if it did not.
    not_taken: str | None = None

    @property
    def latency_s(self) -> float | None:
        """Seconds from sending the line to the first speak or reply, once there is one."""
        if self.sent_at is None or self.first_answer_at is None:
            return None
        return self.first_answer_at - self.sent_at


@dataclass
class Conversation:
    """Every turn in the order it began, with the active agent and the last latency."""

    turns: list[TurnRecord] = field(default_factory=list)
    active_agent: str | None = None
    last_latency_s: float | None = None
    _by_binding: dict[str, TurnRecord] = field(default_factory=dict)

    def start_turn(
        self, binding_id: str, text: str, now: float, *, link_up: bool = True
    ) -> TurnRecord:
        """Record a typed line that was just published (``link_up``: could it reach home)."""
        turn = TurnRecord(binding_id, text, now, sent_while_down=not link_up)
        self.turns.append(turn)
        self._by_binding[binding_id] = turn
        return turn

    def turn_for(self, binding_id: str | None) -> TurnRecord | None:
        """The turn a binding_id belongs to, if one is known."""
        return None if binding_id is None else self._by_binding.get(binding_id)

    def receive(self, item: Incoming, now: float) -> TurnRecord:
        """File an incoming answer or report under its turn; return that turn."""
        turn = self.turn_for(item.binding_id)
        if turn is None:
            turn = TurnRecord(item.binding_id, None, None)
            self.turns.append(turn)
            if item.binding_id is not None:
                self._by_binding[item.binding_id] = turn
        if isinstance(item, MemoryReport):
            turn.notes.append(item)
            return turn
        turn.answers.append(item)
        self.active_agent = item.agent
        if turn.first_answer_at is None:
            turn.first_answer_at = now
            if turn.latency_s is not None:
                self.last_latency_s = turn.latency_s
        return turn


@dataclass
class StatusLine:
    """The status bar: the link, RTT, queued events, the active agent, the last latency.

    ``transport`` says how the TUI reaches home (``direct`` or ``bridge``). With a
    bridge, link, RTT and queue come from its ``bridge.status`` events; without
    one, from the NATS connection itself.
    """

    device: str
    transport: str
    nats_connected: bool = True
    nats_rtt_ms: float | None = None
    queued_local: int = 0
    bridge: LinkStatus | None = None

    def render(self, conversation: Conversation) -> str:
        """The one line of text the status bar shows."""
        parts = [self.device, self._link(), f"rtt {self._rtt()}"]
        parts.append(f"queued {self._queued()}")
        parts.append(f"agent {conversation.active_agent or '-'}")
        latency = conversation.last_latency_s
        parts.append("last turn " + ("-" if latency is None else _seconds(latency)))
        return " │ ".join(parts)

    @property
    def link_up(self) -> bool:
        """True when a typed line can reach home right now."""
        if not self.nats_connected:
            return False
        return self.bridge.up if self.bridge is not None else True

    def _link(self) -> str:
        if not self.nats_connected:
            where = "local NATS" if self.bridge is not None else self.transport
            return f"link DOWN ({where} unreachable)"
        if self.bridge is None:
            return f"link up ({self.transport})"
        if self.bridge.up:
            return f"link up (bridge {self.bridge.bridge})"
        why = f": {self.bridge.detail}" if self.bridge.detail else ""
        return f"link {self.bridge.state.upper()} (bridge {self.bridge.bridge}{why})"

    def _rtt(self) -> str:
        # Through a bridge the round trip that matters is the bridge's, not loopback NATS.
        rtt = self.bridge.rtt_ms if self.bridge is not None else self.nats_rtt_ms
        return "-" if rtt is None else f"{rtt:.1f} ms"

    def _queued(self) -> str:
        bridged = self.bridge.queued if self.bridge is not None else None
        return str(self.queued_local + (bridged or 0))


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
