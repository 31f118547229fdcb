"""What an agent node does with each turn: admit, refuse, queue, yield, retry (pure).

The node (:mod:`home.agents.agent_node`) and its parts do the I/O: the node reads
the inbound rail and settles messages, the worker (:mod:`home.agents.turn_runner`)
prompts τ, the output watch (:mod:`home.agents.output_watch`) reads what it said.
Every choice they make on the way is asked of :class:`Admission`, which holds the
turns' state and returns a decision:

- an utterance arrives (:meth:`Admission.arrive`): a duplicate of one already
  taken is acked unanswered, one past its TTL is terminated, any other is
  admitted into its device's queue (:mod:`home.agents.turn_queue`); one that
  does not parse is terminated too (:data:`INVALID`);
- a turn leaves the queue (:meth:`Admission.begin`): one that expired while it
  waited is stale, not answered (:func:`outlived`);
- the node's own speak goes out (:meth:`Admission.speak_seen`): it is watched for
  its device's playback ack; an ack (:meth:`Admission.speech_acked`) makes the
  device responsive again, a missing one (:meth:`Admission.speech_unheard`) serves
  it last (docs/architecture.md "Agents");
- the turn in flight gives way (*supersede*) when its device does not listen and
  another device's turn waits (:meth:`Admission.should_yield`);
- a refusal to speak comes back (:meth:`Admission.refused`): one re-prompt per
  binding, ahead of everything waiting;
- τ dies mid-turn: the utterance is delivered once more, then given up
  (:func:`may_redeliver`);
- a turn ends (:func:`judge_end`): how it counts, whether its answer goes on the
  reply rail, whether it is reported as failed; an aborted one says why
  (:func:`abort_reason`).

No I/O and no clock: every instant is passed in.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from home.agents.delegation import Delegated
from home.agents.protocol import WireEvent
from home.agents.turn_queue import DeviceQueues
from home.tau_extensions.binding import TurnBinding
from home.tau_extensions.prose import rewrite_request
from shared.messages.verbs import DelegateAnswer

if TYPE_CHECKING:
    from nats.aio.msg import Msg

# How many event ids are remembered for deduplication.
DEDUP_WINDOW = 4096
# How many recent turns a late refusal or speech ack can still be matched to.
RECENT_TURNS = 64
# Deliveries of one utterance across τ deaths (the first, and one retry).
MAX_DELIVERIES = 2

RefusalReason = Literal["invalid", "duplicate", "stale"]


@dataclass
class PendingTurn:
    """One prompt waiting its turn."""

    text: str
    binding: TurnBinding
    correlation: dict[str, Any]
    # Monotonic instant the utterance arrived (for a re-prompt: the refusal).
    received_at: float
    reprompt: bool = False
    deliveries: int = 0
    # The inbound message this turn settles when it is over (None: a re-prompt).
    msg: Msg | None = None
    # The utterance's timestamp + ttl_ms (None: a re-prompt, which has no TTL of its own).
    expires_at: datetime | None = None
    # A task another agent delegated: its answer goes back to the asker.
    delegated: Delegated | None = None
    # The operator's answer to a task this agent delegated (None: any other turn).
    answer: DelegateAnswer | None = None


@dataclass(frozen=True)
class Arrival:
    """One inbound utterance as parsed, with the delivery it came in."""

    text: str
    binding_id: str
    device: str | None
    event_id: str
    # The activation schema that routed it (stamped on everything the turn publishes).
    schema: str | None
    subject: str
    expires_at: datetime
    received_at: float
    msg: Msg | None = None
    delegated: Delegated | None = None
    # False for text between agents (a delegated task, an answer): the memory reflex skips it.
    from_user: bool = True
    # A delegation's answer coming back (its text is the prompt made of it).
    answer: DelegateAnswer | None = None


@dataclass(frozen=True)
class Admit:
    """Queue ``turn``; when ``supersede``, the turn in flight should give way."""

    turn: PendingTurn
    supersede: bool


@dataclass(frozen=True)
class Refuse:
    """Do not answer: count under ``reason`` and settle the message as ``settle``.

    A duplicate is acked (its first copy is answered); an invalid or stale one is
    terminated, since a redelivery cannot make it better.
    """

    reason: RefusalReason
    settle: Literal["ack", "term"]


INVALID = Refuse("invalid", "term")
DUPLICATE = Refuse("duplicate", "ack")
STALE = Refuse("stale", "term")


@dataclass(frozen=True)
class Unheard:
    """A speak went unacknowledged: ``device`` is now served last.

    ``newly``: it was responsive until now (worth a log line); ``supersede``: the
    turn in flight should give way.
    """

    device: str | None
    newly: bool
    supersede: bool


@dataclass(frozen=True)
class Ending:
    """How a turn that reached ``agent_end`` counts, and what the node still owes it."""

    reason: str
    counted: Literal["completed", "aborted", "failed"]
    # Put τ's last answer on the reply rail (an agent with no handset to speak it).
    publish_answer: bool
    # Report the turn as failed, with this reason (None: nothing to report).
    failure: str | None


class Admission:
    """The turns an agent node holds: queued, in flight, recently run; and its rulings."""

    def __init__(self, *, dedup_window: int = DEDUP_WINDOW, recent: int = RECENT_TURNS) -> None:
        self.queue: DeviceQueues[PendingTurn] = DeviceQueues(lambda t: t.binding.device)
        self.current: PendingTurn | None = None
        self._dedup_window = dedup_window
        self._recent_size = recent
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._recent: OrderedDict[str, PendingTurn] = OrderedDict()
        self._reprompted: set[str] = set()
        # Bindings whose speak went out and whose speech.completed has not come back.
        self._unacked: dict[str, str | None] = {}
        self._turn_seq = 0

    def __len__(self) -> int:
        """How many turns wait (not counting the one in flight)."""
        return len(self.queue)

    # --- arrival and departure ---------------------------------------------------

    def arrive(self, arrival: Arrival, now: datetime) -> Admit | Refuse:
        """Rule on an inbound utterance at ``now``; an admitted one is queued."""
        if arrival.event_id in self._seen:
            return DUPLICATE
        if now > arrival.expires_at:
            # Redelivered after a crash, or held up: an answer now would answer nobody.
            return STALE
        self._seen[arrival.event_id] = None
        while len(self._seen) > self._dedup_window:
            self._seen.popitem(last=False)
        self._turn_seq += 1
        turn = PendingTurn(
            text=arrival.text,
            binding=TurnBinding(
                binding_id=arrival.binding_id,
                device=arrival.device,
                event_id=arrival.event_id,
                turn=self._turn_seq,
                reprompt=not arrival.from_user,
                schema=arrival.schema,
            ),
            correlation={
                "subject": arrival.subject,
                "binding_id": arrival.binding_id,
                "event_id": arrival.event_id,
            },
            received_at=arrival.received_at,
            msg=arrival.msg,
            expires_at=arrival.expires_at,
            delegated=arrival.delegated,
            answer=arrival.answer,
        )
        self._recent[turn.binding.binding_id] = turn
        while len(self._recent) > self._recent_size:
            forgotten, _ = self._recent.popitem(last=False)
            self._reprompted.discard(forgotten)
        return self._push(turn, urgent=False)

    def begin(self) -> PendingTurn:
        """Take the next turn off the queue as the one in flight; ``IndexError`` if none."""
        turn = self.queue.pop()
        self.current = turn
        return turn

    def end(self) -> None:
        """The turn in flight is over."""
        self.current = None

    def should_yield(self) -> bool:
        """Whether the turn in flight should stop: its device does not listen and another waits.

        One τ serves every device, so a turn that keeps speaking to a silent board
        would hold up everyone else for up to the wall clock.
        """
        current = self.current
        if current is None:
            return False
        device = current.binding.device
        return self.queue.is_unresponsive(device) and self.queue.waiting_elsewhere(device)

    def _push(self, turn: PendingTurn, *, urgent: bool) -> Admit:
        self.queue.push(turn, urgent=urgent)
        return Admit(turn, supersede=self.should_yield())

    # --- the node's own output ---------------------------------------------------

    def refused(self, binding_id: str, reason: str, received_at: float) -> Admit | None:
        """A refusal to speak for ``binding_id``: one re-prompt, queued ahead of all.

        The refusal travels over NATS and ``agent_end`` over stdio; either may arrive
        first, so the turn is looked up by binding rather than assumed to be the
        current one. None: not a recent turn, or already re-prompted.
        """
        turn = self._recent.get(binding_id)
        if turn is None or binding_id in self._reprompted:
            return None
        self._reprompted.add(binding_id)
        return self._push(
            PendingTurn(
                text=rewrite_request(reason),
                binding=replace(turn.binding, reprompt=True),
                correlation={**turn.correlation, "reprompt": True},
                received_at=received_at,
                reprompt=True,
            ),
            urgent=True,
        )

    def speak_seen(self, binding_id: str | None) -> str | None:
        """A speak went out: the binding to watch for its ack, or None if not a recent turn."""
        turn = self._recent.get(binding_id or "")
        if turn is None:
            return None
        self._unacked[turn.binding.binding_id] = turn.binding.device
        while len(self._unacked) > self._recent_size:
            del self._unacked[next(iter(self._unacked))]
        return turn.binding.binding_id

    def speech_acked(self, binding_id: str) -> None:
        """Any ack, ok or not, shows the device is there: serve it in its turn again."""
        self._unacked.pop(binding_id, None)
        # The ack may come in after the turn's end marked the device: look it up anew.
        turn = self._recent.get(binding_id)
        if turn is not None:
            self.queue.mark_responsive(turn.binding.device)

    def speech_unheard(self, binding_id: str) -> Unheard | None:
        """The speak timeout for ``binding_id`` passed; None if it was acked in time."""
        if binding_id not in self._unacked:
            return None
        device = self._unacked.pop(binding_id)
        newly = not self.queue.is_unresponsive(device)
        self.queue.mark_unresponsive(device)
        return Unheard(device, newly=newly, supersede=self.should_yield())


def outlived(turn: PendingTurn, now: datetime) -> datetime | None:
    """When ``turn`` expired, if it did before ``now`` while it waited (it is then stale).

    The TTL is checked on arrival and again when a turn leaves the queue: a turn held
    up behind others must not be answered minutes after anyone was listening.
    """
    if turn.expires_at is None or now <= turn.expires_at:
        return None
    return turn.expires_at


def may_redeliver(turn: PendingTurn) -> bool:
    """Whether ``turn``, whose τ died under it, is delivered once more."""
    return turn.deliveries < MAX_DELIVERIES


def judge_end(end: WireEvent, *, answers_aloud: bool) -> Ending:
    """How the turn that ended with ``end`` counts; ``answers_aloud``: a handset speaks."""
    reason = end.end_reason or ("error" if end.is_error else "done")
    publish = reason == "done" and not answers_aloud
    if reason == "aborted":
        return Ending(reason, "aborted", publish, None)
    if end.is_error:
        return Ending(reason, "failed", publish, end.error or "the turn ended in an error")
    return Ending(reason, "completed", publish, None)


def abort_reason(*, yielded: bool, device: str | None, wall_clock_s: float) -> str:
    """Why a turn was aborted: it yielded to another device, or it ran over the wall clock."""
    if yielded:
        return f"device {device} is not acknowledging speech and other devices' turns were waiting"
    return f"the turn took longer than {wall_clock_s:g}s"
