"""One bridge side's delivery decisions, as a state machine. Pure: no I/O, no clocks.

:class:`BridgeSession` is told what happened and answers with the :data:`Action` list
to carry out, in order; the I/O shell around it is :class:`bridge.node.core.BridgeCore`
(docs/architecture.md, "Bridge")::

    send(subject, data, now)       an event published on local NATS, for the peer
    tick(now)                      the outbox's expiry sweep
    hello() / greet(frame, device) this side's hello, then the peer's first frame on a link
    receive(frame, now, mono_ns)   any later frame from the peer
    published(action)              a PublishLocal was carried out
    next_batch(now)                the next EVENTS frame, when the link's writer can take one
    detach()                       the link ended

Every decision is committed as it is made, with one exception: whether local NATS
took a publish is for the shell to find out. A record from the peer therefore
counts as handled (its sequence number acknowledgeable, its event id remembered,
``delivered`` counted) only once the shell reports it :meth:`BridgeSession.published`;
if the publish fails, nothing was committed and the peer resends it on the next link.
The later records of the same EVENTS frame are decided then, since a resend of that
record, or the same event again, is a duplicate only once it is delivered.

A durable session (``durable=True``, a side with an outbox file) also answers with
:class:`StoreEvent` for each event it accepts and :class:`ForgetAcked` for each
acknowledgement, for the shell to commit; :meth:`BridgeSession.restore` takes back
what a previous run of the side left (docs/architecture.md, "Bridge: the durable outbox").

Times are passed in: ``now`` is wall-clock seconds (``time.time()``, what events
expire by), ``mono_ns`` a monotonic clock in nanoseconds (what heartbeat nonces carry).
The hello carries this side's clock reading, and the peer's, read against this side's
clock as it arrives, says how the peer's events are judged (:mod:`bridge.protocol.clock`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from bridge.errors import FrameError, HelloRefused, Refused, Unstored
from bridge.node.counters import BridgeCounters
from bridge.protocol import (
    Ack,
    ClockReading,
    Crossing,
    Deduper,
    EventRecord,
    Events,
    Frame,
    HalfPolicy,
    Hello,
    HelloFrame,
    Outbox,
    OutboxEntry,
    PeerClock,
    Ping,
    Pong,
    ReceiveState,
    Refuse,
    Resume,
    bounded_findings,
    check_hello,
    measure,
)
from shared.schema.bridge_half import BridgeHalf

BATCH_RECORDS = 1024
BATCH_BYTES = 512 * 1024


# Per event: slots, not frozen (docs/architecture.md, "Bridge"); never changed once made.
@dataclass(slots=True)
class Remaining:
    """The records of one EVENTS frame still to decide, and when the frame arrived."""

    records: tuple[EventRecord, ...] = ()
    start: int = 0
    now: float = 0.0


# Per event: slots, not frozen (docs/architecture.md, "Bridge"); never changed once made.
@dataclass(slots=True)
class PublishLocal:
    """Publish a record from the peer on local NATS, then report :meth:`BridgeSession.published`.

    ``rest`` carries the frame's later records, decided once this one is published.
    """

    subject: str
    data: bytes
    seq: int
    event_id: str
    expires_at: float
    rest: Remaining = field(default_factory=Remaining, compare=False, repr=False)


@dataclass(frozen=True)
class SendFrame:
    """Send one control frame to the peer (the PONG to its PING)."""

    frame: Frame


@dataclass(frozen=True)
class Transmit:
    """Events wait for the link: wake its writer to take a :meth:`~BridgeSession.next_batch`."""


_TRANSMIT = Transmit()  # one for every event sent: it carries nothing


@dataclass(frozen=True)
class RefuseEvent:
    """One event refused by this half, already counted under ``refused.<reason>``; log it."""

    reason: str
    where: str
    message: str


@dataclass(frozen=True)
class DropExpired:
    """One event dropped past its expiry, already counted under ``expired``; log it."""

    event_id: str
    where: str


@dataclass(frozen=True)
class ExpireOutbox:
    """``count`` outbox entries expired, already counted under ``expired``; log it."""

    count: int
    what: str


@dataclass(frozen=True)
class StoreEvent:
    """Commit one accepted event to the durable outbox (before the link may carry it)."""

    entry: OutboxEntry


@dataclass(frozen=True)
class ForgetAcked:
    """The peer handled everything up to ``seq``: drop it from the durable outbox."""

    seq: int


@dataclass(frozen=True)
class RefuseHello:
    """The peer's hello is refused: log it, send REFUSE with these, end the link."""

    reason: str
    findings: tuple[str, ...] = ()


Action = (
    PublishLocal
    | SendFrame
    | Transmit
    | RefuseEvent
    | DropExpired
    | ExpireOutbox
    | RefuseHello
    | StoreEvent
    | ForgetAcked
)


class BridgeSession:
    """Delivery state and decisions of one bridge side, across any number of links.

    ``device`` is the device the links speak for (on home: the one the SSH key proves);
    ``durable`` asks for the store actions (:class:`StoreEvent`, :class:`ForgetAcked`).
    """

    def __init__(
        self, half: BridgeHalf, device: str | None = None, *, durable: bool = False
    ) -> None:
        self.half = half
        self.durable = durable
        self.policy = HalfPolicy(half, device)
        self.outbox = Outbox(half.limits.outbox_events)
        self.inbound = ReceiveState()
        self.dedupe = Deduper()
        self.counters = BridgeCounters()
        # The current link's send queue, in the order entries go out; None while no link is up.
        self._queue: deque[OutboxEntry] | None = None
        # The peer's clock as measured at the last hello; None: its events judged as stamped.
        self.peer_clock: PeerClock | None = None

    @property
    def linked(self) -> bool:
        """True between a hello accepted by :meth:`greet` and :meth:`detach`."""
        return self._queue is not None

    @property
    def queued(self) -> bool:
        """True while the current link has outbox entries waiting to go out."""
        return bool(self._queue)

    @property
    def ack_point(self) -> int:
        """The last sequence number handled from the peer's stream: what an ACK may say."""
        return self.inbound.seq

    # --- local side -------------------------------------------------------------

    def send(self, subject: str, data: bytes, now: float) -> list[Action]:
        """An event published on local NATS under an exported subject: into the outbox."""
        try:
            event = self.policy.outgoing(subject, data)
        except Refused as refusal:
            return [self._refused(refusal, "an outgoing event")]
        expires_at = event.expires_at
        if expires_at < now:
            self.counters.expired += 1
            return [DropExpired(event.event_id, f"on {subject}")]
        try:
            entry = self.outbox.add(subject, event.data, event.event_id, expires_at)
        except Refused as refusal:
            return [self._refused(refusal, f"{event.event_id} on {subject}")]
        self.counters.accepted += 1
        actions: list[Action] = [StoreEvent(entry)] if self.durable else []
        if self._queue is None:
            return actions
        self._queue.append(entry)
        actions.append(_TRANSMIT)
        return actions

    def unstored(self, entry: OutboxEntry, why: str) -> RefuseEvent:
        """The durable outbox could not commit ``entry`` (``why`` names the file): take it
        back and refuse it.

        Its store comes before its transmit, so the link has not carried it, and its
        producer has not been answered: told ``refused``, it knows the event is not here.
        """
        self.outbox.remove(entry.seq)
        self.counters.accepted -= 1
        return self._refused(Unstored(why), f"{entry.event_id} on {entry.subject}")

    def restore(
        self,
        pending: list[OutboxEntry],
        seen: dict[str, float],
        inbound: tuple[str | None, int] | None,
    ) -> list[OutboxEntry]:
        """Take back what a previous run left, before any link: returns the outbox renumbered.

        ``pending`` (unacknowledged, in order) goes into the outbox under this run's
        stream, ``seen`` into the dedupe window, ``inbound`` (the peer's stream and the
        sequence handled in it) into the receive state.
        """
        entries: list[OutboxEntry] = []
        for e in pending:
            try:
                entries.append(self.outbox.add(e.subject, e.data, e.event_id, e.expires_at))
            except Refused as refusal:  # the half's outbox_events shrank since that run
                self.counters.refused[refusal.reason] += 1
        for event_id, expires_at in seen.items():
            self.dedupe.remember(event_id, expires_at)
        if inbound is not None and inbound[0] is not None:
            self.inbound.attach(inbound[0])
            self.inbound.accept(inbound[1])
        return entries

    def tick(self, now: float) -> list[Action]:
        """The expiry sweep: drop outbox entries past their expiry."""
        gone = self.outbox.drop_expired(now)
        if not gone:
            return []
        self.counters.expired += len(gone)
        return [ExpireOutbox(len(gone), "unacked event(s) expired in the outbox")]

    # --- the link ---------------------------------------------------------------

    def hello(self, clock: ClockReading | None = None) -> Hello:
        """This side's hello: its half, its stream, how far it got in the peer's, its clock."""
        resume = Resume(self.inbound.stream, self.inbound.seq)
        return Hello.for_half(self.half, self.outbox.stream, resume, clock)

    def greet(
        self, first: Frame, authenticated_device: str | None, clock: ClockReading | None = None
    ) -> list[Action]:
        """The peer's first frame: its hello attaches the link, or is refused.

        ``clock`` is this side's clock as the hello arrived: with the peer's reading it
        gives the offset between the two, and whether the peer's events are judged here.
        Raises :class:`HelloRefused` when the peer refused this side instead, and
        :class:`FrameError` when the first frame is not a hello at all.
        """
        if isinstance(first, Refuse):
            raise HelloRefused(
                f"the peer refused this half: {first.reason}", bounded_findings(first.findings)
            )
        if not isinstance(first, HelloFrame):
            raise FrameError(f"expected HELLO first, got {type(first).__name__}")
        try:
            hello = Hello.from_body(first.body)
            check_hello(self.half, hello, authenticated_device)
        except HelloRefused as exc:
            return [RefuseHello(exc.message, exc.findings)]
        except FrameError as exc:
            return [RefuseHello(str(exc))]
        self.peer_clock = (
            measure(hello.clock, clock) if hello.clock is not None and clock is not None else None
        )
        known = hello.received.stream == self.outbox.stream
        unseen = self.outbox.restart(hello.received.seq if known else None)
        self.inbound.attach(hello.stream)
        self._queue = deque(self.outbox.pending())
        self.counters.link_ups += 1
        actions: list[Action] = []
        if self.durable and known and hello.received.seq > 0:
            actions.append(ForgetAcked(hello.received.seq))
        if unseen:
            self.counters.expired += len(unseen)
            actions.append(ExpireOutbox(len(unseen), "sent event(s) expired unacked"))
        return actions

    def detach(self) -> None:
        """The link ended: what it had not sent waits in the outbox for the next one."""
        self._queue = None
        self.counters.link_downs += 1

    def receive(self, frame: Frame, now: float, mono_ns: int) -> list[Action]:
        """A frame from the peer on an attached link.

        Raises :class:`HelloRefused` when the peer closes the link with REFUSE, and
        :class:`FrameError` for a second HELLO.
        """
        match frame:
            case Events(records):
                return self._deliver(Remaining(records, 0, now))
            case Ack(seq):
                self.outbox.ack(seq)
                return [ForgetAcked(seq)] if self.durable else []
            case Ping(nonce):
                return [SendFrame(Pong(nonce))]
            case Pong(nonce):
                self.counters.note_rtt((mono_ns - nonce) / 1e6)
                return []
            case Refuse(reason, findings):
                raise HelloRefused(
                    f"the peer closed the link: {reason}", bounded_findings(findings)
                )
            case HelloFrame():
                raise FrameError("a second HELLO on an established link")

    def published(self, action: PublishLocal) -> list[Action]:
        """Local NATS took ``action``'s event: it is handled; decide the frame's next records."""
        self.inbound.accept(action.seq)
        self.dedupe.remember(action.event_id, action.expires_at)
        self.counters.delivered += 1
        return self._deliver(action.rest)

    def next_batch(self, now: float) -> Events | None:
        """The next EVENTS frame for the link, bounded in records and bytes; None if none."""
        batch: list[EventRecord] = []
        size = 0
        while self._queue and len(batch) < BATCH_RECORDS and size < BATCH_BYTES:
            entry = self._queue.popleft()
            if not self.outbox.contains(entry.seq):
                continue  # acked (resend raced an ack) or expired by the sweep
            if entry.expires_at < now:  # never reached the peer: this link resends only that
                self.outbox.remove(entry.seq)
                self.counters.expired += 1
                continue
            batch.append(EventRecord(entry.seq, entry.subject, entry.data))
            size += len(entry.data)
            self.counters.sent += 1
            if self.outbox.mark_sent(entry):
                self.counters.resent += 1
        return Events(tuple(batch)) if batch else None

    # --- decisions ----------------------------------------------------------------

    def _refused(self, refusal: Refused, where: str) -> RefuseEvent:
        self.counters.refused[refusal.reason] += 1
        return RefuseEvent(refusal.reason, where, str(refusal))

    def _deliver(self, remaining: Remaining) -> list[Action]:
        """Decide records in order, up to the first one to publish."""
        records, now = remaining.records, remaining.now
        actions: list[Action] = []
        for i in range(remaining.start, len(records)):
            record = records[i]
            self.counters.received += 1
            if record.seq <= self.inbound.seq:
                self.counters.duplicates += 1
                continue
            outcome = self._check_incoming(record, now)
            if isinstance(outcome, Crossing):
                publish = PublishLocal(
                    record.subject,
                    outcome.data,
                    record.seq,
                    outcome.event_id,
                    outcome.expires_at,
                    Remaining(records, i + 1, now),
                )
                actions.append(publish)
                return actions
            # Refused, expired or seen before: handled, by not publishing it.
            self.inbound.accept(record.seq)
            if outcome is not None:
                actions.append(outcome)
        return actions

    def _check_incoming(
        self, record: EventRecord, now: float
    ) -> Crossing | RefuseEvent | DropExpired | None:
        """The event to publish, or why not (None: a duplicate, counted)."""
        try:
            event = self.policy.incoming(record.subject, record.data, self.peer_clock, now)
        except Refused as refusal:
            return self._refused(refusal, f"an incoming event (seq {record.seq})")
        if event.expires_at < now:
            self.counters.expired += 1
            return DropExpired(event.event_id, "on arrival")
        if self.dedupe.seen(event.event_id, now):
            self.counters.duplicates += 1
            return None
        return event
