"""A speak request as the board takes it: the message of :mod:`shared.messages.voice`
with the agent and device its subject names.

Pure: no I/O. The speaker node and the TUI both take speech as this one type; the
board's other messages (turn, partial, speech completed) are the rail's own types in
:mod:`shared.messages.voice`.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.voice import Speak
from shared.subjects import parse_subject


@dataclass(frozen=True)
class SpeakRequest:
    """Text to say on this device, from ``events.workspace.<agent>.out.speak.<device>``.

    ``more`` is true on a part of an answer that more parts follow.
    """

    agent: str
    device: str
    binding_id: str | None
    text: str
    event_id: str
    more: bool = False

    @classmethod
    def from_event(cls, subject: str, event: Event) -> SpeakRequest:
        """Parse a speak event; EnvelopeError names what is wrong."""
        info = parse_subject(subject)
        if info.kind != "speak" or info.device is None or info.agent is None:
            raise EnvelopeError("<subject>", f"{subject!r} is not a device speak subject")
        speak = Speak.from_event(event)
        return cls(
            info.agent, info.device, event.binding_id, speak.text, event.event_id, speak.more
        )
