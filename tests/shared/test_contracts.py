"""The contracts that cross packages: the home state file and the pairing verb."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.control import (
    BRIDGE_PAIR,
    VERBS,
    PairReply,
    PairRequest,
    PairResult,
    control_subject,
    member_control_subject,
)
from shared.errors import EnvelopeError
from shared.home_state import STATE_FILE, HomeState, HomeStateError

STATE = HomeState(
    pid=42,
    data_dir="/x",
    nats_url="nats://127.0.0.1:1",
    monitor_url=None,
    started_at="2026-01-01T00:00:00+00:00",
    components={"jmfts": {"url": "http://127.0.0.1:2"}},
    member="m1",
)


def test_the_home_state_file_saves_and_loads_and_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(HomeStateError, match=STATE_FILE):
        HomeState.load(tmp_path)
    STATE.save(tmp_path)
    assert HomeState.load(tmp_path) == STATE
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / STATE_FILE).write_text(json.dumps({"pid": 1}))
    with pytest.raises(HomeStateError, match=r"home\.json is not a readable home state file"):
        HomeState.load(tmp_path)


def test_the_control_verbs_are_answered_on_their_subjects() -> None:
    assert BRIDGE_PAIR in VERBS
    assert control_subject(BRIDGE_PAIR) == "home.control.bridge.pair"
    assert member_control_subject("m1", "ping") == "home.member.m1.control.ping"
    with pytest.raises(ValueError, match="unknown control verb"):
        control_subject("reboot")


def test_a_pairing_round_trips_and_a_refusal_says_why() -> None:
    assert json.loads(PairRequest("board").to_json()) == {"device": "board"}
    result = PairResult("board", "/d/board.edge.yaml", "/d/secrets", "ssh://127.0.0.1:2222")
    ok = json.dumps({"ok": True, "result": result.to_dict()}).encode()
    assert PairReply.from_json(ok) == PairReply(result)
    refused = {"ok": False, "error": {"code": "refused", "message": "no"}}
    assert PairReply.from_json(json.dumps(refused).encode()) == PairReply(None, "refused", "no")
    with pytest.raises(EnvelopeError) as info:
        PairReply.from_json(json.dumps({"ok": True, "result": {"device": "b"}}).encode())
    assert info.value.key == "result.edge_half"
    with pytest.raises(EnvelopeError):
        PairReply.from_json(b"not json")
