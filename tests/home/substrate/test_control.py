"""The control surface's wire shapes."""

from __future__ import annotations

import pytest

from shared import control
from shared.control import ControlReply, ControlRequest
from shared.errors import ControlError


def test_request_round_trip_and_typed_arguments() -> None:
    request = ControlRequest.from_json(
        ControlRequest({"name": "talk", "allow_overlap": True}).to_json()
    )
    assert request.text("name") == "talk"
    assert request.flag("allow_overlap") is True
    assert request.flag("absent") is False
    assert request.text("file", required=False) is None
    assert ControlRequest.from_json(b"  ").args == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{nope", "request is not JSON"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
def test_malformed_requests_are_bad_requests(raw: bytes, message: str) -> None:
    with pytest.raises(ControlError, match=message) as error:
        ControlRequest.from_json(raw)
    assert error.value.code == control.BAD_REQUEST


def test_mistyped_arguments_are_named() -> None:
    with pytest.raises(ControlError, match="'name' must be a non-empty string"):
        ControlRequest({"name": 3}).text("name")
    with pytest.raises(ControlError, match="'allow_overlap' must be true or false"):
        ControlRequest({"allow_overlap": "yes"}).flag("allow_overlap")


def test_reply_round_trip() -> None:
    ok = ControlReply.from_json(ControlReply.success({"a": [1]}).to_json())
    assert ok.unwrap() == {"a": [1]}
    failed = ControlReply.from_json(ControlReply.failure(control.OVERLAP, "rail x").to_json())
    with pytest.raises(ControlError) as error:
        failed.unwrap()
    assert (error.value.code, error.value.message) == (control.OVERLAP, "rail x")
    with pytest.raises(ControlError, match="malformed control reply"):
        ControlReply.from_json(b'{"ok": false}')


def test_control_subjects() -> None:
    assert control.control_subject(control.SCHEMA_APPLY) == "home.control.schema.apply"
    with pytest.raises(ValueError, match="unknown control verb"):
        control.control_subject("reboot")
