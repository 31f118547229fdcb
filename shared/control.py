"""Home's control surface as every side sees it: its verbs, its subjects, its error codes,
and the ``bridge.pair`` verb's request and result.

A request on ``home.control.<verb>`` is a JSON object of arguments; a reply is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code": ..., "message": ...}}``
(home's :mod:`home.substrate.control` answers and asks). The edge pairs through it too
(``edge ... --data-dir``), so what a pairing asks and answers lives here, read and
written by both sides through :class:`PairRequest` and :class:`PairResult`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.errors import EnvelopeError
from shared.messages import fields

CONTROL_PREFIX = "home.control"
STATUS_PREFIX = "home.status"
# One member's own control surface: home.member.<member>.control.<verb>.
MEMBER_PREFIX = "home.member"

# Verbs, each answered on f"{CONTROL_PREFIX}.{verb}".
PING = "ping"
STATUS = "status"
SCHEMA_APPLY = "schema.apply"
SCHEMA_UNAPPLY = "schema.unapply"
SCHEMA_LIST = "schema.list"
# Answered by the bridge component: pair a device on this machine and serve it at once.
BRIDGE_PAIR = "bridge.pair"
VERBS = (PING, STATUS, SCHEMA_APPLY, SCHEMA_UNAPPLY, SCHEMA_LIST, BRIDGE_PAIR)

# Error codes of a reply.
BAD_REQUEST, NOT_FOUND, REFUSED, OVERLAP, INTERNAL = (
    "bad_request",
    "not_found",
    "refused",
    "overlap",
    "internal",
)


def control_subject(verb: str) -> str:
    """The subject a verb is answered on."""
    if verb not in VERBS:
        raise ValueError(f"unknown control verb {verb!r}; known: {', '.join(VERBS)}")
    return f"{CONTROL_PREFIX}.{verb}"


def member_control_subject(member: str, verb: str) -> str:
    """The subject one member of a clustered home answers a verb on, and no other member
    (docs/architecture.md "Growing past one machine")."""
    return f"{MEMBER_PREFIX}.{member}.{control_subject(verb).removeprefix('home.')}"


@dataclass(frozen=True)
class PairRequest:
    """``bridge.pair``: pair ``device`` with the home on this machine and serve it now."""

    device: str

    def to_args(self) -> dict[str, Any]:
        """The request's arguments."""
        return {"device": self.device}

    def to_json(self) -> bytes:
        """The request as sent."""
        return json.dumps(self.to_args()).encode()


@dataclass(frozen=True)
class PairResult:
    """What ``bridge.pair`` made: the device's edge half, the directory of its key, and
    the endpoint home serves it on."""

    device: str
    edge_half: str
    secrets: str
    endpoint: str

    def to_dict(self) -> dict[str, Any]:
        """The result as the reply carries it."""
        return {
            "device": self.device,
            "edge_half": self.edge_half,
            "secrets": self.secrets,
            "endpoint": self.endpoint,
        }

    @classmethod
    def from_dict(cls, data: Any) -> PairResult:
        """Read a result; EnvelopeError names the key that is wrong."""
        if not isinstance(data, dict):
            raise EnvelopeError("result", f"must be an object, got {fields.kind_of(data)}")
        return cls(
            device=_result_string(data, "device"),
            edge_half=_result_string(data, "edge_half"),
            secrets=_result_string(data, "secrets"),
            endpoint=_result_string(data, "endpoint"),
        )


@dataclass(frozen=True)
class PairReply:
    """The reply to ``bridge.pair`` as its asker reads it: the result, or why there is none."""

    result: PairResult | None
    code: str | None = None
    message: str | None = None

    @classmethod
    def from_json(cls, raw: bytes) -> PairReply:
        """Read a control reply carrying a pairing; EnvelopeError names what is wrong."""
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise EnvelopeError("<reply>", f"is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise EnvelopeError("<reply>", f"must be an object, got {fields.kind_of(data)}")
        if data.get("ok") is True:
            return cls(PairResult.from_dict(data.get("result")))
        error = data.get("error")
        if not isinstance(error, dict):
            return cls(None)
        code, message = error.get("code"), error.get("message")
        return cls(
            None, None if code is None else str(code), None if message is None else str(message)
        )


def _opt_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _result_string(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise EnvelopeError(f"result.{key}", f"must be a string, got {fields.kind_of(value)}")
    return value
