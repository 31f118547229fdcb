"""τ's RPC wire, as typed shapes and pure functions (no I/O).

One JSON-RPC 2.0 message per LF-terminated line on τ's stdio. A request the
node sends gets one response by ``id``; τ also pushes ``event`` notifications,
each carrying one WireEvent, and a ``compaction_end`` notification when a
``compact`` is over (read as a WireEvent of that type). A prompt answers twice:
the acceptance response, then the ``agent_end`` event whose ``submission_id``
matches. Only the second means the turn is over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from home.agents.errors import TauProtocolError

# The protocol major version this node was written against (τ 0.14.1 speaks 3.0).
PROTOCOL_MAJOR = 3

# JSON-RPC error codes τ uses that the node acts on.
SUBMISSION_REJECTED = -32000
# A mutating verb (``compact``) waited 5 s for the turn in flight to stop, and it had not.
TURN_STILL_RUNNING = -32002
# How long an aborted turn (or compaction) may take to unwind before τ is killed and restarted.
ABORT_GRACE_S = 10.0

# get_capabilities answers with ~180 KiB on one line; size the reader for the protocol.
STDIO_READER_LIMIT = 16 * 1024 * 1024

# The notification that ends a ``compact``; the node reads it as a WireEvent of this type.
COMPACTION_END = "compaction_end"

# Verbs the node needs; the handshake refuses a τ that lacks any of them.
REQUIRED_COMMANDS = ("prompt", "abort", "get_capabilities")


@dataclass(frozen=True)
class RpcResponse:
    """τ's answer to one request: ``result`` or ``error`` (code, message)."""

    id: int
    result: dict[str, Any] | None
    error_code: int | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        """True when τ answered with a result rather than an error."""
        return self.error_code is None


@dataclass(frozen=True)
class WireEvent:
    """One ``event`` notification: the fields the node reads, and the rest kept raw."""

    type: str
    submission_id: str | None = None
    end_reason: str | None = None
    is_error: bool = False
    error: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    stop_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Capabilities:
    """What the handshake established about the τ on the other end."""

    protocol_version: str
    commands: frozenset[str]


def encode_request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    """One request line, LF-terminated."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"


def parse_line(line: bytes) -> RpcResponse | WireEvent:
    """Parse one line from τ's stdout into a response or an event."""
    try:
        data = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TauProtocolError(f"τ wrote a line that is not JSON: {exc}: {line[:200]!r}") from exc
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        raise TauProtocolError(f"τ wrote a line that is not JSON-RPC 2.0: {line[:200]!r}")
    if data.get("method") == "event":
        return _parse_event(data.get("params"))
    if data.get("method") == COMPACTION_END:
        return _parse_event({**_params(data.get("params")), "type": COMPACTION_END})
    if "id" not in data:
        raise TauProtocolError(f"τ wrote a notification the node does not know: {line[:200]!r}")
    request_id = data["id"]
    if not isinstance(request_id, int):
        # A null id answers a line τ could not read at all (parse error, oversize line).
        raise TauProtocolError(f"τ could not read a request the node sent: {line[:400]!r}")
    error = data.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise TauProtocolError(f"τ wrote a malformed error object: {line[:200]!r}")
        return RpcResponse(
            id=request_id,
            result=None,
            error_code=int(error.get("code", 0)),
            error_message=str(error.get("message", "")),
        )
    result = data.get("result")
    if not isinstance(result, dict):
        raise TauProtocolError(f"τ answered request {request_id} with a non-object result")
    return RpcResponse(id=request_id, result=result)


def _parse_event(params: Any) -> WireEvent:
    if not isinstance(params, dict) or not isinstance(params.get("type"), str):
        raise TauProtocolError(f"τ wrote an event without a type: {params!r:.200}")
    return WireEvent(
        type=params["type"],
        submission_id=_opt_str(params, "submission_id"),
        end_reason=_opt_str(params, "end_reason"),
        is_error=bool(params.get("is_error", False)),
        error=_opt_str(params, "error"),
        tool_name=_opt_str(params, "tool_name"),
        tool_call_id=_opt_str(params, "tool_call_id"),
        stop_reason=_opt_str(params, "stop_reason"),
        raw=params,
    )


def _params(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise TauProtocolError(f"τ wrote a notification without params: {params!r:.200}")
    return params


def _opt_str(params: dict[str, Any], key: str) -> str | None:
    value = params.get(key)
    return value if isinstance(value, str) else None


def check_capabilities(result: dict[str, Any]) -> Capabilities:
    """Validate the ``get_capabilities`` result: protocol major and the verbs we need."""
    version = result.get("protocol_version")
    if not isinstance(version, str) or not version.split(".", 1)[0].isdigit():
        raise TauProtocolError(f"get_capabilities: protocol_version missing or bad: {version!r}")
    major = int(version.split(".", 1)[0])
    if major != PROTOCOL_MAJOR:
        raise TauProtocolError(
            f"τ speaks RPC protocol {version}; this node was written for {PROTOCOL_MAJOR}.x"
        )
    raw_commands = result.get("commands")
    if not isinstance(raw_commands, list):
        raise TauProtocolError("get_capabilities: 'commands' is not a list")
    commands = frozenset(
        c["name"] for c in raw_commands if isinstance(c, dict) and isinstance(c.get("name"), str)
    )
    missing = [c for c in REQUIRED_COMMANDS if c not in commands]
    if missing:
        raise TauProtocolError(f"get_capabilities: τ lacks the commands {missing}")
    return Capabilities(protocol_version=version, commands=commands)


def prompt_params(text: str, submission_id: str, correlation: dict[str, Any]) -> dict[str, Any]:
    """The ``prompt`` params for one inbound event: one submission, refused if mid-turn."""
    return {
        "text": text,
        "submission_id": submission_id,
        "source": "bus",
        "submitter": "agent-node",
        "correlation": correlation,
        "multitask_strategy": "reject",
    }
