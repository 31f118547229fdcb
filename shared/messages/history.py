"""A device's conversation with an agent, asked for and answered on home's NATS.

Not an event: a request/reply pair on ``home.history.<agent>`` (the agent node
answers), like the control surface. The request names the device; the reply
carries that device's conversation, its last turns in order. It never crosses a
bridge (no half exports ``home.>``): a conversation's text stays on home's NATS,
and ``edge tui`` asks for it only when it is connected there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.errors import EnvelopeError
from shared.messages import fields
from shared.subjects import check_name

HISTORY_PREFIX = "home.history"
DEFAULT_TURNS = 20
# A request names a device and a count: anything longer is refused unread.
MAX_REQUEST_BYTES = 1024


def history_subject(agent: str) -> str:
    """Where agent ``agent`` answers for its conversations: ``home.history.<agent>``."""
    return f"{HISTORY_PREFIX}.{check_name(agent, 'agent')}"


def _object(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise EnvelopeError("payload", f"must be a JSON object: {exc}") from exc
    if not isinstance(data, dict):
        raise EnvelopeError("payload", f"must be a JSON object, got {fields.kind_of(data)}")
    return data


@dataclass(frozen=True)
class HistoryRequest:
    """Ask for ``device``'s conversation: its last ``turns`` turns."""

    device: str
    turns: int = DEFAULT_TURNS

    def to_json(self) -> bytes:
        """The request as sent."""
        return json.dumps({"device": self.device, "turns": self.turns}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> HistoryRequest:
        """Read a request; EnvelopeError names the field that is wrong."""
        if len(raw) > MAX_REQUEST_BYTES:
            raise EnvelopeError(
                "payload", f"{len(raw)} bytes; a request holds at most {MAX_REQUEST_BYTES}"
            )
        data = _object(raw)
        device = fields.text(data, "device")
        check_name(device, "device")
        turns = fields.opt_int(data, "turns")
        if turns is not None and turns < 1:
            raise EnvelopeError("payload.turns", f"must be at least 1, got {turns}")
        return cls(device, DEFAULT_TURNS if turns is None else turns)


@dataclass(frozen=True)
class HistoryTurn:
    """One turn: when, under which binding id, what was said, what came back."""

    at: str
    binding_id: str | None
    said: str
    answer: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The turn as the reply carries it."""
        return {
            "at": self.at,
            "binding_id": self.binding_id,
            "said": self.said,
            "answer": list(self.answer),
        }


@dataclass(frozen=True)
class HistoryReply:
    """The agent's answer: the conversation's id and turns, or why there are none."""

    agent: str
    device: str
    session_id: str | None
    turns: tuple[HistoryTurn, ...] = ()
    error: str | None = None

    def to_json(self) -> bytes:
        """The reply as sent."""
        body = {
            "agent": self.agent,
            "device": self.device,
            "session_id": self.session_id,
            "turns": [t.to_dict() for t in self.turns],
            "error": self.error,
        }
        return json.dumps(body).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> HistoryReply:
        """Read a reply; EnvelopeError names the field that is wrong."""
        data = _object(raw)
        turns = []
        for where, item in fields.objects(data, "turns"):
            binding = item.get("binding_id")
            if binding is not None and not isinstance(binding, str):
                raise EnvelopeError(f"payload.{where}.binding_id", "must be a string or null")
            answer = fields.array(item, "answer")
            if not all(isinstance(line, str) for line in answer):
                raise EnvelopeError(f"payload.{where}.answer", "must be an array of strings")
            turns.append(
                HistoryTurn(
                    at=fields.item_string(item, "at", where),
                    binding_id=binding,
                    said=fields.item_string(item, "said", where),
                    answer=tuple(answer),
                )
            )
        return cls(
            agent=fields.string(data, "agent"),
            device=fields.string(data, "device"),
            session_id=fields.opt_string(data, "session_id"),
            turns=tuple(turns),
            error=fields.opt_string(data, "error"),
        )
