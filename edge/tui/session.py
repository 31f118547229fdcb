"""The one NATS connection ``edge tui`` and ``edge say`` talk through.

:class:`EdgeSession` connects to a NATS URL (home's, with ``--direct``; the edge's
own loopback server, with the bridge beside it, by default), publishes typed
turns, and hands every event on the device's agent rails and on the local
``bridge.status`` subject to a :class:`SessionObserver`. After the observer has
shown a speak event, the session publishes the ``speech.completed`` ack for its
``binding_id``, as the board does after playback. Malformed events are counted
and logged with their subject, shown to the observer as refused, never passed on
and never allowed to stop the session.

Through the bridge (``asks_bridge``) turns and acks are handed to the edge bridge
half as the board's are (:mod:`edge.handover`): a turn it does not take raises
:class:`~edge.errors.NotTaken` from :meth:`EdgeSession.send_turn`, an ack it does not
take is counted and told to the observer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from datetime import datetime
from typing import Literal

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError

from edge.errors import NotTaken
from edge.handover import hand_to_bridge
from edge.tui.errors import TransportError
from edge.tui.link import LinkStatus
from edge.tui.wire import Incoming, TypedTurn, parse_incoming, speech_ack
from edge.wire import SpeakRequest
from shared.bus_credentials import credentials_refused, redact, refused_message
from shared.errors import ContractError
from shared.event import EnvelopeLimits, Event, new_binding_id, utc_now
from shared.lifecycle import Service, cancel_and_wait
from shared.messages.history import HistoryReply, HistoryRequest, history_subject
from shared.nats_confirm import confirm_subscriptions
from shared.subjects import BRIDGE_STATUS_PATTERN, check_name, device_rail_patterns

log = logging.getLogger("tether.edge.tui")

# The two edge nodes the keyboard and the screen stand in for.
TURN_SOURCE = "edge.keyboard"
ACK_SOURCE = "edge.screen"

Direction = Literal["in", "out"]
_FIRST_CONNECT_ATTEMPTS = 2


class SessionObserver:
    """What a session reports; override what you need (the defaults ignore it)."""

    async def on_incoming(self, item: Incoming) -> None:
        """A speak, reply or memory report for this device (acked after this returns)."""

    def on_acked(self, binding_id: str) -> None:
        """The ``speech.completed`` ack for ``binding_id`` was published."""

    def on_link(self, status: LinkStatus) -> None:
        """The edge bridge reported its link state."""

    def on_connection(self, connected: bool) -> None:
        """The NATS connection went down (False) or came back (True)."""

    def on_rtt(self, rtt_ms: float) -> None:
        """A fresh round trip to the NATS server."""

    def on_raw(self, direction: Direction, subject: str, data: bytes) -> None:
        """Every event received (``in``) or published (``out``), as it crossed the wire."""

    def on_refused(self, subject: str, reason: str) -> None:
        """An event that failed to parse; it was counted and dropped."""

    def on_not_taken(self, failure: NotTaken) -> None:
        """A ``speech.completed`` ack the bridge half did not take: home will not hear it."""


class EdgeSession(Service):
    """Connect with ``async with``; :meth:`listen` starts the subscriptions.

    ``asks_bridge``: the NATS is the edge's, with its bridge half beside it, so turns
    and acks are asked of the half; on home's own NATS (``--direct``) no half answers,
    and they are published.
    """

    def __init__(
        self,
        nats_url: str,
        device: str,
        *,
        asks_bridge: bool = False,
        connect_timeout_s: float = 5.0,
        rtt_interval_s: float = 2.0,
        limits: EnvelopeLimits | None = None,
    ) -> None:
        self.nats_url = nats_url
        self.device = check_name(device, "device")
        self.asks_bridge = asks_bridge
        self.limits = limits or EnvelopeLimits()
        self.malformed = 0
        self.acked = 0
        self.acks_not_taken = 0
        self.queued_while_down = 0
        self._connect_timeout_s = connect_timeout_s
        self._rtt_interval_s = rtt_interval_s
        self._nc: Client | None = None
        self._observer = SessionObserver()
        self._subs: list[Subscription] = []
        self._rtt_task: asyncio.Task[None] | None = None
        self._sequences: dict[str, itertools.count[int]] = {}
        self._refused_credentials = False

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Connect to NATS (TransportError if it cannot be reached or refuses us)."""
        try:
            self._nc = await nats.connect(
                self.nats_url,
                name=f"edge-tui-{self.device}",
                connect_timeout=max(1, round(self._connect_timeout_s)),
                allow_reconnect=True,
                # A few tries at first, so an unreachable URL is an error and not a hang...
                max_reconnect_attempts=_FIRST_CONNECT_ATTEMPTS,
                reconnect_time_wait=0.25,
                disconnected_cb=self._disconnected,
                reconnected_cb=self._reconnected,
                error_cb=self._error,
            )
        except (NatsError, OSError, TimeoutError) as exc:
            # After its retries nats-py says only "no servers"; the refusal came before.
            if credentials_refused(exc) or self._refused_credentials:
                raise TransportError(
                    f"home's NATS refused the connection: {refused_message(self.nats_url)}"
                ) from exc
            raise TransportError(f"cannot reach NATS at {redact(self.nats_url)}: {exc}") from exc
        # ...then, once connected, never give up: a restarted home or edge NATS comes back.
        self._nc.options["max_reconnect_attempts"] = -1

    async def close(self) -> None:
        """Stop the RTT probe, unsubscribe and close the connection; idempotent.

        The observer hears nothing more once closing starts (its screen may be gone).
        """
        self._observer = SessionObserver()
        task, self._rtt_task = self._rtt_task, None
        if task is not None:
            await cancel_and_wait(task)
        nc, self._nc = self._nc, None
        self._subs.clear()
        if nc is not None and not nc.is_closed:
            # Drain would wait on a dead server for its whole timeout; flush what was
            # published (an ack, say) while the server is there, then close.
            with contextlib.suppress(NatsError, OSError, TimeoutError):
                if nc.is_connected:
                    await nc.flush(timeout=2)
                await nc.close()

    @property
    def client(self) -> Client:
        """The NATS client; only inside ``async with``."""
        if self._nc is None:
            raise TransportError("the session is not connected (use it inside 'async with')")
        return self._nc

    @property
    def connected(self) -> bool:
        """True while the NATS connection is up."""
        return self._nc is not None and self._nc.is_connected

    async def listen(self, observer: SessionObserver) -> None:
        """Subscribe the device's agent rails and the bridge status; report to ``observer``."""
        self._observer = observer
        nc = self.client
        for pattern in device_rail_patterns(self.device):
            self._subs.append(await nc.subscribe(pattern, cb=self._on_rail))
        self._subs.append(await nc.subscribe(BRIDGE_STATUS_PATTERN, cb=self._on_status))
        await confirm_subscriptions(nc)
        self._rtt_task = asyncio.create_task(self._probe_rtt(), name="edge-tui-rtt")

    # --- sending --------------------------------------------------------------------

    async def send_turn(self, text: str, *, now: datetime | None = None) -> TypedTurn:
        """Publish a typed line as a turn with a fresh binding_id; return what was sent.

        Raises :class:`NotTaken` (its ``binding_id`` the turn's) when the bridge half
        did not take it, and :class:`TransportError` when it could not be published.
        """
        turn = TypedTurn(self.device, new_binding_id(), text, now or utc_now())
        event = turn.to_event(source=TURN_SOURCE, sequence_number=self._next_seq(TURN_SOURCE))
        await self._publish(turn.subject, event)
        return turn

    async def ack_speech(self, speech: SpeakRequest) -> None:
        """Publish ``speech.completed`` (``ok: true``) for a speak that was shown."""
        if speech.binding_id is None:
            log.warning("speak %s carries no binding_id; nothing to ack", speech.event_id)
            return
        ack = speech_ack(speech.binding_id, self.device)
        event = ack.to_event(source=ACK_SOURCE, sequence_number=self._next_seq(ACK_SOURCE))
        await self._publish(ack.subject, event)
        self.acked += 1
        self._observer.on_acked(speech.binding_id)

    async def history(self, agent: str, turns: int = 20, timeout_s: float = 5.0) -> HistoryReply:
        """This device's conversation with ``agent``, asked of the agent on home's NATS.

        Only home's NATS has an answer (``--direct``): through the bridge nobody
        answers, and TransportError says where the history is instead.
        """
        request = HistoryRequest(self.device, turns)
        try:
            msg = await self.client.request(
                history_subject(agent), request.to_json(), timeout=timeout_s
            )
        except (NatsError, TimeoutError) as exc:
            raise TransportError(
                f"no history from {agent} ({type(exc).__name__}): it is kept on home; "
                f"run `edge tui --direct` or `home sessions list --device {self.device}`"
            ) from exc
        try:
            return HistoryReply.from_json(msg.data)
        except ContractError as exc:
            raise TransportError(
                f"{agent} answered with a history that is malformed: {exc}"
            ) from exc

    def _next_seq(self, source: str) -> int:
        return next(self._sequences.setdefault(source, itertools.count()))

    async def _publish(self, subject: str, event: Event) -> None:
        data = event.to_json(self.limits)
        nc = self.client
        if not nc.is_connected:
            # nats-py keeps it in its reconnect buffer and flushes it on reconnect.
            self.queued_while_down += 1
        if self.asks_bridge:
            self._observer.on_raw("out", subject, data)
            await hand_to_bridge(nc, subject, event, limits=self.limits)
            return
        try:
            await nc.publish(subject, data)
        except NatsError as exc:
            raise TransportError(f"cannot publish on {subject}: {exc}") from exc
        self._observer.on_raw("out", subject, data)

    # --- receiving ------------------------------------------------------------------

    def _parse(self, msg: Msg) -> Event | None:
        self._observer.on_raw("in", msg.subject, msg.data)
        try:
            return Event.from_json(msg.data, self.limits)
        except ContractError as exc:
            self._refuse(msg.subject, str(exc))
            return None

    def _refuse(self, subject: str, reason: str) -> None:
        self.malformed += 1
        log.warning("refused an event on %s: %s", subject, reason)
        self._observer.on_refused(subject, reason)

    async def _on_rail(self, msg: Msg) -> None:
        event = self._parse(msg)
        if event is None:
            return
        try:
            item = parse_incoming(msg.subject, event)
        except ContractError as exc:
            self._refuse(msg.subject, str(exc))
            return
        try:
            await self._observer.on_incoming(item)
        except Exception:  # the screen failing to draw must not cost home its ack
            log.exception("the observer failed on %s", msg.subject)
        if isinstance(item, SpeakRequest):
            try:
                await self.ack_speech(item)
            except TransportError as exc:
                log.warning("%s", exc)
            except NotTaken as exc:
                self.acks_not_taken += 1
                log.warning("%s (%s)", exc, exc.verdict)
                self._observer.on_not_taken(exc)

    async def _on_status(self, msg: Msg) -> None:
        event = self._parse(msg)
        if event is None:
            return
        try:
            status = LinkStatus.from_event(event)
        except ContractError as exc:
            self._refuse(msg.subject, str(exc))
            return
        # On home's NATS (--direct) the home halves report too; the TUI is the edge.
        if status.side not in (None, "edge"):
            return
        self._observer.on_link(status)

    async def _probe_rtt(self) -> None:
        while True:
            if self._nc is not None and self._nc.is_connected:
                try:
                    rtt_s = await self._nc.rtt(timeout=2)
                except (NatsError, OSError, TimeoutError):
                    pass
                else:
                    self._observer.on_rtt(rtt_s * 1000)
            await asyncio.sleep(self._rtt_interval_s)

    async def _disconnected(self) -> None:
        self._observer.on_connection(False)

    async def _reconnected(self) -> None:
        self.queued_while_down = 0
        self._observer.on_connection(True)

    async def _error(self, exc: Exception) -> None:
        # Reconnect attempts against a dead server land here; the link state says enough.
        # Any attempt refused for credentials says more than a later one's timeout.
        self._refused_credentials = self._refused_credentials or credentials_refused(exc)
        log.debug("NATS error on %s: %s", redact(self.nats_url), exc)
