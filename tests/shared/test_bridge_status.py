"""The bridge.status event shape and its subject."""

from __future__ import annotations

import pytest

from shared.errors import EnvelopeError, SubjectError
from shared.event import Event
from shared.messages.bridge import BridgeStatus
from shared.subjects import (
    BRIDGE_STATUS_PATTERN,
    bridge_status_subject,
    device_rail_pattern,
    matches,
    speak_pattern,
)


def test_round_trip_through_json() -> None:
    status = BridgeStatus("board", reachable=False, reason="connection refused")
    event = status.to_event(source="bridge.board", sequence_number=3)
    back = BridgeStatus.from_event(Event.from_json(event.to_json()))
    assert back == status
    assert matches(BRIDGE_STATUS_PATTERN, status.subject)


def test_refuses_a_non_boolean_reachable() -> None:
    event = Event.new(
        "bridge.status", {"bridge": "board", "reachable": "no"}, source="x", sequence_number=0
    )
    with pytest.raises(EnvelopeError, match=r"payload\.reachable"):
        BridgeStatus.from_event(event)


def test_refuses_another_event_type() -> None:
    event = Event.new("speak", {"text": "hi"}, source="x", sequence_number=0)
    with pytest.raises(EnvelopeError, match="event_type"):
        BridgeStatus.from_event(event)


def test_subject_builders_check_their_tokens() -> None:
    assert bridge_status_subject("board") == "events.bridge.board.status"
    assert matches(speak_pattern("board"), "events.workspace.edge_asr.out.speak.board")
    assert not matches(speak_pattern("board"), "events.workspace.edge_asr.out.speak.tui")
    with pytest.raises(SubjectError):
        speak_pattern("Bad Device")
    assert device_rail_pattern("reply", "board") == "events.workspace.*.out.reply.board"
    assert device_rail_pattern("speak", "tui") == speak_pattern("tui")
    with pytest.raises(SubjectError, match="unknown device rail"):
        device_rail_pattern("shout", "board")
