"""Never silently deaf: a turn made while home is unreachable gets a short local spoken notice.

The notice is synthesized once, at start, so it plays even when the board is
busy or the link is down. Home's reachability comes from the bridge's
``bridge.status`` events on the local NATS; until a bridge says otherwise,
home is taken as reachable. When home returns, nothing is said: turns go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Self

from edge.audio.base import Pcm
from edge.bus import Bus
from edge.tts import PiperSynthesizer, Speaker
from shared.errors import ContractError
from shared.event import Event
from shared.messages.bridge import BridgeStatus
from shared.messages.voice import NOTICE_EVENT_TYPE, Notice
from shared.subjects import BRIDGE_STATUS_PATTERN, edge_notice_subject, sensation_turn_subject

log = logging.getLogger(__name__)


class NoticeNode:
    """Watches bridge status and this device's turns; speaks the notice when home is away."""

    def __init__(
        self,
        bus: Bus,
        speaker: Speaker,
        synth: PiperSynthesizer,
        *,
        device: str,
        text: str,
        on_settled: Callable[[str], None] | None = None,
        on_home_change: Callable[[bool, str], None] | None = None,
    ) -> None:
        self.bus = bus
        self.speaker = speaker
        self.synth = synth
        self.device = device
        self.text = text
        self.notices_played = 0
        self._links: dict[str, BridgeStatus] = {}
        self._pcm: Pcm | None = None
        self._on_settled = on_settled
        self._on_home_change = on_home_change

    async def __aenter__(self) -> Self:
        self._pcm = await asyncio.to_thread(self.synth.render, self.text)
        await self.bus.subscribe(BRIDGE_STATUS_PATTERN, self._on_status)
        await self.bus.subscribe(sensation_turn_subject(self.device), self._on_turn)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

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
        self.speaker.say_local(self._pcm, self.text)
        # Say locally that the notice was spoken, for monitors and HIL runs on the board.
        notice = Event.new(
            NOTICE_EVENT_TYPE,
            Notice(self.text, event.binding_id).to_payload(),
            source=f"edge.audio.{self.device}",
            sequence_number=self.notices_played,
            binding_id=event.binding_id,
        )
        await self.bus.publish(edge_notice_subject(self.device), notice)
        if self._on_settled is not None and event.binding_id is not None:
            self._on_settled(event.binding_id)
