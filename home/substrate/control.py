"""The control surface's wire shapes: request/reply on ``home.control.<verb>``.

A request is a JSON object of arguments; a reply is ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": {"code": ..., "message": ...}}``. Any NATS client
can drive a home this way; the ``home`` CLI is one such client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from home.substrate.errors import ControlBadRequest, ControlError, ControlRefused

# The verbs, their subjects and the error codes are the contract's, shared with the
# edge (shared/control.py); home's side of the surface names them from here too.
from shared.control import (
    BAD_REQUEST,
    BRIDGE_PAIR,
    CONTROL_PREFIX,
    INTERNAL,
    MEMBER_PREFIX,
    NOT_FOUND,
    OVERLAP,
    PING,
    REFUSED,
    SCHEMA_APPLY,
    SCHEMA_LIST,
    SCHEMA_UNAPPLY,
    STATUS,
    STATUS_PREFIX,
    VERBS,
    control_subject,
    member_control_subject,
)

__all__ = [
    "BAD_REQUEST",
    "BRIDGE_PAIR",
    "CONTROL_PREFIX",
    "ERROR_CLASSES",
    "INTERNAL",
    "MEMBER_PREFIX",
    "NOT_FOUND",
    "OVERLAP",
    "PING",
    "REFUSED",
    "SCHEMA_APPLY",
    "SCHEMA_LIST",
    "SCHEMA_UNAPPLY",
    "STATUS",
    "STATUS_PREFIX",
    "VERBS",
    "ControlReply",
    "ControlRequest",
    "StatusChange",
    "control_error",
    "control_subject",
    "member_control_subject",
]

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
