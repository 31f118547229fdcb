"""The reply rail on a board with no screen: text not to be spoken goes to the log.

Agents publish status lines and unspeakable answers (``spoken: false`` with a
``reason``) on ``events.workspace.<agent>.out.reply.<device>``. The TUI shows
them; the board writes them to its journal, so they are never silently lost.
"""

from __future__ import annotations

import logging

from edge.bus import Bus
from shared.lifecycle import Service
from shared.messages.voice import Reply
from shared.publisher import Received
from shared.subjects import device_rail_pattern

log = logging.getLogger(__name__)


class ReplyLog(Service):
    """Logs every reply for this device, with the agent's reason when it was not spoken."""

    def __init__(self, bus: Bus, *, device: str) -> None:
        self.bus = bus
        self.device = device
        self.replies = 0

    async def start(self) -> None:
        """Subscribe to the device's reply rail (an unreadable reply is the bus's to count)."""
        await self.bus.subscribe_to(
            device_rail_pattern("reply", self.device), Reply.from_event, self._on_reply
        )

    async def _on_reply(self, received: Received[Reply]) -> None:
        self.replies += 1
        reply = received.message
        log.warning(
            "reply (not spoken%s) from %s [%s]: %s",
            f": {reply.reason}" if reply.reason is not None else "",
            received.subject.agent,
            received.binding_id or "-",
            reply.text,
        )
