"""The agent node's output watch: what its agent says, and whether the devices heard it.

The node reads its own ``events.workspace.<agent>.out.>`` (:meth:`OutputWatch.on_out`):
a refusal to speak earns one re-prompt, a speak is watched until its device acks it
(``events.action.speech.completed.<binding_id>``, :meth:`OutputWatch.on_speech_completed`);
one unheard within the handset's ack timeout serves its device last
(:meth:`OutputWatch.speech_unheard`), and a delegated task is handed to the
delegation desk. What a message on ``out.>`` means is read by :func:`read_out` (no
I/O). The watch also passes every event τ writes on its wire to the listeners
(:meth:`OutputWatch.watch_wire`) and to the node's parts that wait on one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from nats.aio.msg import Msg

from home.agents.admission import Admission, Admit
from home.agents.node_stats import NodeStats
from home.agents.protocol import WireEvent
from home.tau_extensions.handset import DEFAULT_ACK_TIMEOUT_S as HANDSET_ACK_TIMEOUT_S
from shared.errors import ContractError
from shared.event import EnvelopeLimits, Event
from shared.messages.voice import Reply
from shared.schema.catalog import NodeSpec
from shared.subjects import SPEECH_COMPLETED_PATTERN, parse_subject

log = logging.getLogger(__name__)

# Every device's playback acks (docs/architecture.md "Acks"): whose speech went unheard.
SPEECH_ACKS = SPEECH_COMPLETED_PATTERN


def speech_ack_timeout(spec: NodeSpec) -> float:
    """How long the node's handset waits for a playback ack (its ``ack_timeout_s``)."""
    for ext in spec.extensions:
        if ext.name == "handset":
            return float(ext.config.get("ack_timeout_s", HANDSET_ACK_TIMEOUT_S))
    return HANDSET_ACK_TIMEOUT_S


@dataclass(frozen=True)
class DelegatedOut:
    """The agent handed a task off (its ``out.delegate`` verb event)."""

    event: Event


@dataclass(frozen=True)
class Spoke:
    """The agent spoke for ``binding_id`` (None: a speak that names no binding)."""

    binding_id: str | None


@dataclass(frozen=True)
class RefusedToSpeak:
    """The handset refused what the agent said for ``binding_id``, saying why."""

    binding_id: str
    reason: str


OutputSeen = DelegatedOut | Spoke | RefusedToSpeak | None


def read_out(subject: str, data: bytes, limits: EnvelopeLimits) -> OutputSeen:
    """What one message on the node's own ``out.>`` means (None: nothing the node acts on)."""
    try:
        info = parse_subject(subject)
        if info.kind not in ("reply", "speak", "verb"):
            return None
        event = Event.from_json(data, limits)
    except ContractError:
        return None
    if info.kind == "verb":
        return DelegatedOut(event) if info.verb == "delegate" else None
    if info.kind == "speak":
        return Spoke(event.binding_id)
    return _refusal(event)


def _refusal(event: Event) -> RefusedToSpeak | None:
    """A reply on ``out.reply``: only a refusal to speak is acted on."""
    try:
        reply = Reply.from_event(event)
    except ContractError:
        return None
    if reply.kind != "refusal" or event.binding_id is None:
        return None
    return RefusedToSpeak(event.binding_id, reply.reason or "it could not be spoken")


def acked_binding(subject: str) -> str:
    """The binding id a speech ack is for: its subject's last token."""
    return subject.rsplit(".", 1)[-1]


class TurnSignals(Protocol):
    """What the watch tells the worker (:class:`~home.agents.turn_runner.TurnRunner`)."""

    def admitted(self, ruling: Admit) -> None:
        """A turn was queued (a re-prompt); it may supersede the one in flight."""
        ...

    def give_way(self) -> None:
        """The turn in flight should give way."""
        ...


class DelegationsOut(Protocol):
    """Who times the answers of tasks this agent delegates (the delegation desk)."""

    def delegated_out(self, event: Event) -> None:
        """The agent handed a task off."""
        ...


class WireReader(Protocol):
    """A part of the node that reads τ's wire events."""

    def on_wire_event(self, event: WireEvent) -> None:
        """Read one event τ wrote."""
        ...


@dataclass(frozen=True)
class WatchParts:
    """What the watch acts on: the admission policy, the worker, the delegation desk,
    the parts that read τ's wire (in order), and the node's counters."""

    admission: Admission
    turns: TurnSignals
    delegations: DelegationsOut
    wire_readers: Sequence[WireReader]
    stats: NodeStats


class OutputWatch:
    """Reads the node's own output, the devices' speech acks and τ's wire events."""

    def __init__(
        self, name: str, parts: WatchParts, *, limits: EnvelopeLimits, speech_ack_timeout_s: float
    ) -> None:
        self.name = name
        self.limits = limits
        self.speech_ack_timeout_s = speech_ack_timeout_s
        self._parts = parts
        self._stats = parts.stats
        self._listeners: list[Callable[[WireEvent], None]] = []

    def watch_wire(self, listener: Callable[[WireEvent], None]) -> None:
        """Call ``listener`` with every event τ writes (monitors, benchmarks, tests)."""
        self._listeners.append(listener)

    def on_wire_event(self, event: WireEvent) -> None:
        """One event τ wrote: to the listeners first, then to the node's parts."""
        for listener in self._listeners:
            listener(event)
        for reader in self._parts.wire_readers:
            reader.on_wire_event(event)

    async def on_out(self, msg: Msg) -> None:
        """Read the node's own output: a refusal to speak earns one re-prompt, and a
        speak is remembered until its device acks it. Any local client can publish
        there, so nothing it sends escapes uncounted."""
        try:
            self._act_on(read_out(msg.subject, msg.data, self.limits))
        # The out rail's boundary: counted as an internal error; the watch goes on.
        except Exception as exc:  # noqa: BLE001
            self._stats.internal_error(self.name, "out", msg, exc)

    def _act_on(self, seen: OutputSeen) -> None:
        admission = self._parts.admission
        if isinstance(seen, DelegatedOut):
            self._parts.delegations.delegated_out(seen.event)
        elif isinstance(seen, Spoke):
            watched = admission.speak_seen(seen.binding_id)
            if watched is not None:
                asyncio.get_running_loop().call_later(
                    self.speech_ack_timeout_s, self.speech_unheard, watched
                )
        elif isinstance(seen, RefusedToSpeak):
            ruling = admission.refused(seen.binding_id, seen.reason, time.monotonic())
            if ruling is not None:
                self._stats.reprompts += 1
                self._parts.turns.admitted(ruling)

    async def on_speech_completed(self, msg: Msg) -> None:
        """Any ack, ok or not, shows the device is there: serve it in its turn again.

        Only the subject is read (its last token, a dictionary key): nothing here can fail
        on what a sender puts in it."""
        self._parts.admission.speech_acked(acked_binding(msg.subject))

    def speech_unheard(self, binding_id: str) -> None:
        """No ack within the speak timeout: the device goes to the back of the round."""
        unheard = self._parts.admission.speech_unheard(binding_id)
        if unheard is None:
            return  # acked in time
        self._stats.unacked_speech += 1
        if unheard.newly:
            log.warning(
                "%s: device %s did not acknowledge speech for %s; its turns now wait for "
                "the other devices'",
                self.name, unheard.device, binding_id,
            )  # fmt: skip
        if unheard.supersede:
            self._parts.turns.give_way()
