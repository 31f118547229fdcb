"""Home's control surface as every side sees it: its verbs, its subjects, its error codes,
requests and replies, the status changes home publishes, and the ``bridge.pair`` verb's
request and result.

A request on ``home.control.<verb>`` is a JSON object of arguments (:class:`ControlRequest`);
a reply is ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code": ...,
"message": ...}}`` (:class:`ControlReply`), and a failed one raises the
:class:`~shared.errors.ControlError` its code maps to. Any NATS client can drive a home
this way; the ``home`` CLI is one such client. The edge pairs through it too
(``edge ... --data-dir``), so what a pairing asks and answers lives here, read and
written by both sides through :class:`PairRequest` and :class:`PairResult`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shared.errors import (
    ControlBadRequest,
    ControlError,
    ControlRefused,
    EnvelopeError,
)
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
# Also the bridge component's (`home devices`): list the paired devices and the revoked
# keys; unpair a device (forget it); revoke its key (refused for good, and recorded).
BRIDGE_DEVICES = "bridge.devices"
BRIDGE_UNPAIR = "bridge.unpair"
BRIDGE_REVOKE = "bridge.revoke"
VERBS = (
    PING,
    STATUS,
    SCHEMA_APPLY,
    SCHEMA_UNAPPLY,
    SCHEMA_LIST,
    BRIDGE_PAIR,
    BRIDGE_DEVICES,
    BRIDGE_UNPAIR,
    BRIDGE_REVOKE,
)

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


# What a failed reply means to the caller: the umbrella its ControlError carries, and so
# the exit code of a command that meets it (shared/cli.py). An unknown or internal code
# stays a plain ControlError: a failure.
ERROR_CLASSES: dict[str, type[ControlError]] = {
    BAD_REQUEST: ControlBadRequest,
    NOT_FOUND: ControlBadRequest,
    REFUSED: ControlRefused,
    OVERLAP: ControlRefused,
}


def control_error(code: str, message: str) -> ControlError:
    """The ControlError a reply with ``code`` stands for, of the class its code maps to."""
    return ERROR_CLASSES.get(code, ControlError)(code, message)


@dataclass(frozen=True)
class ControlRequest:
    """The arguments of one control request."""

    args: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The request's bytes."""
        return json.dumps(self.args).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> ControlRequest:
        """Parse a request; an empty body means no arguments."""
        if not raw.strip():
            return cls()
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ControlError(BAD_REQUEST, f"request is not JSON: {exc}") from exc
        except RecursionError as exc:
            raise ControlError(BAD_REQUEST, "request nests too deeply") from exc
        if not isinstance(data, dict):
            raise ControlError(BAD_REQUEST, "request must be a JSON object of arguments")
        return cls(data)

    def text(self, key: str, *, required: bool = True) -> str | None:
        """A string argument; ControlError naming it if missing or mistyped."""
        value = self.args.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            raise ControlError(BAD_REQUEST, f"argument {key!r} must be a non-empty string")
        return value

    def flag(self, key: str) -> bool:
        """A boolean argument, false when absent."""
        value = self.args.get(key, False)
        if not isinstance(value, bool):
            raise ControlError(BAD_REQUEST, f"argument {key!r} must be true or false")
        return value


@dataclass(frozen=True)
class ControlReply:
    """The answer to one control request."""

    ok: bool
    result: Any = None
    code: str = ""
    message: str = ""

    @classmethod
    def success(cls, result: Any) -> ControlReply:
        """A successful reply."""
        return cls(True, result)

    @classmethod
    def failure(cls, code: str, message: str) -> ControlReply:
        """A refusal or error."""
        return cls(False, None, code, message)

    def to_json(self) -> bytes:
        """The reply's bytes."""
        if self.ok:
            return json.dumps({"ok": True, "result": self.result}).encode("utf-8")
        body = {"ok": False, "error": {"code": self.code, "message": self.message}}
        return json.dumps(body).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> ControlReply:
        """Parse a reply; ControlError if it is not one."""
        try:
            data = json.loads(raw)
            if data["ok"] is True:
                return cls.success(data.get("result"))
            error = data["error"]
            return cls.failure(str(error["code"]), str(error["message"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ControlError(INTERNAL, f"malformed control reply: {raw[:200]!r}") from exc

    def unwrap(self) -> Any:
        """The result, or the ControlError of the remote code, carrying it and the message."""
        if not self.ok:
            raise control_error(self.code, self.message)
        return self.result


@dataclass(frozen=True)
class StatusChange:
    """One change of state, published on ``home.status.<kind>.<name>``.

    ``kind`` is ``component``, ``node`` or ``schema``; ``at`` is a UNIX time.
    """

    kind: str
    name: str
    state: str
    reason: str
    at: float

    @property
    def subject(self) -> str:
        """Where it is published (node names keep their dots as extra tokens)."""
        return f"{STATUS_PREFIX}.{self.kind}.{self.name}"

    def to_json(self) -> bytes:
        """The change's bytes."""
        return json.dumps(self.__dict__).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> StatusChange:
        """Parse a published change; ControlError naming the problem if it is not one."""
        try:
            data = json.loads(raw)
            return cls(
                kind=str(data["kind"]),
                name=str(data["name"]),
                state=str(data["state"]),
                reason=str(data["reason"]),
                at=float(data["at"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ControlError(BAD_REQUEST, f"not a status change: {raw[:200]!r}") from exc


def _opt_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _result_string(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise EnvelopeError(f"result.{key}", f"must be a string, got {fields.kind_of(value)}")
    return value
