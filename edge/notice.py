"""Never silently deaf: a turn home cannot answer gets a short local spoken notice.

Two notices, each synthesized once, at start, so they play even when the board is
busy or the link is down:

- a turn made while home is unreachable gets ``text``. Home's reachability comes
  from the bridge's ``bridge.status`` events on the local NATS; until a bridge says
  otherwise, home is taken as reachable. When home returns, nothing is said;
- a turn home reports as ``failed`` or ``aborted`` on this device's reply rail
  (``events.workspace.<agent>.out.reply.<device>``) gets ``failure_text``, so a
  failure is heard, not only written to the reply log;
- a turn the bridge half did not take (refused, expired, or no answer within its
  TTL: :mod:`edge.handover`) gets ``text`` too: home will not hear it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from edge.audio.base import Pcm
from edge.bus import Bus
from edge.errors import NotTaken
from edge.tts import PiperSynthesizer, Speaker
from shared.errors import ContractError
from shared.event import Event
from shared.lifecycle import Service
from shared.messages.bridge import BridgeStatus
from shared.messages.voice import Notice, Reply
from shared.publisher import Received
from shared.subjects import (
    BRIDGE_STATUS_PATTERN,
    device_rail_pattern,
    edge_notice_subject,
    sensation_turn_subject,
)

log = logging.getLogger(__name__)

# Reply kinds that mean home gave up on the turn (docs/architecture.md "Subjects").
FAILED_KINDS = ("failed", "aborted")


class NoticeNode(Service):
    """Watches bridge status, this device's turns and replies; speaks a notice when home is
    away or reports a turn it could not finish."""

    def __init__(
        self,
        bus: Bus,
        speaker: Speaker,
        synth: PiperSynthesizer,
        *,
        device: str,
        text: str,
        failure_text: str,
        on_settled: Callable[[str], None] | None = None,
        on_home_change: Callable[[bool, str], None] | None = None,
    ) -> None:
        self.bus = bus
        self.speaker = speaker
        self.synth = synth
        self.device = device
        self.text = text
        self.failure_text = failure_text
        self.notices_played = 0
        self.failure_notices_played = 0
        self.not_taken_notices_played = 0
        self._links: dict[str, BridgeStatus] = {}
        self._pcm: Pcm | None = None
        self._failure_pcm: Pcm | None = None
        self._on_settled = on_settled
        self._on_home_change = on_home_change

    async def start(self) -> None:
        """Render both notices and subscribe to the bridge status, the turns and the replies."""
        self._pcm = await asyncio.to_thread(self.synth.render, self.text)
        self._failure_pcm = await asyncio.to_thread(self.synth.render, self.failure_text)
        await self.bus.subscribe(BRIDGE_STATUS_PATTERN, self._on_status)
        await self.bus.subscribe(sensation_turn_subject(self.device), self._on_turn)
        await self.bus.subscribe_to(
            device_rail_pattern("reply", self.device), Reply.from_event, self._on_reply
        )

    @property
    def samples(self) -> int:
        """Length of the rendered notice in samples at the voice's rate (0 before start)."""
        return 0 if self._pcm is None else len(self._pcm)

    @property
    def home_reachable(self) -> bool:
        """False while any bridge reports its peer unreachable."""
        return all(status.reachable for status in self._links.values())

    async def _on_status(self, subject: str, event: Event) -> None:
        try:
            status = BridgeStatus.from_event(event)
        except ContractError as exc:
            log.warning("ignored a malformed bridge.status on %s: %s", subject, exc)
            return
        before = self.home_reachable
        self._links[status.bridge] = status
        if before != self.home_reachable:
            detail = f"bridge {status.bridge}" + (f": {status.reason}" if status.reason else "")
            # Unreachable is worth a line in a board's journal even when not verbose.
            log.log(
                logging.INFO if status.reachable else logging.WARNING,
                "home is %s (%s)",
                "reachable" if status.reachable else "unreachable",
                detail,
            )
            if self._on_home_change is not None:
                self._on_home_change(self.home_reachable, detail)

    async def _on_turn(self, subject: str, event: Event) -> None:
        if self.home_reachable or self._pcm is None:
            return
        self.notices_played += 1
        await self._say(self._pcm, self.text, event.binding_id)

    async def _on_reply(self, received: Received[Reply]) -> None:
        reply = received.message
        if reply.kind not in FAILED_KINDS or self._failure_pcm is None:
            return
        log.warning("home reports turn %s %s: %s", received.binding_id, reply.kind, reply.reason)
        self.failure_notices_played += 1
        await self._say(self._failure_pcm, self.failure_text, received.binding_id)

    async def on_not_taken(self, failure: NotTaken) -> None:
        """An event for home the bridge did not take: a turn of this device gets ``text``.

        Not while home is unreachable: that turn has had the notice already. A speech
        ack not taken is only counted and logged (by the bus): what it acks was heard.
        """
        if failure.subject != sensation_turn_subject(self.device):
            return
        if not self.home_reachable or self._pcm is None:
            return
        self.not_taken_notices_played += 1
        await self._say(self._pcm, self.text, failure.binding_id)

    async def _say(self, pcm: Pcm, text: str, binding_id: str | None) -> None:
        """Play a notice and say locally that it was spoken, for monitors and HIL runs."""
        self.speaker.say_local(pcm, text)
        notice = Notice(text, binding_id).to_event(
            source=f"edge.audio.{self.device}",
            sequence_number=(
                self.notices_played + self.failure_notices_played + self.not_taken_notices_played
            ),
            binding_id=binding_id,
        )
        await self.bus.publish(edge_notice_subject(self.device), notice)
        if self._on_settled is not None and binding_id is not None:
            self._on_settled(binding_id)
