"""Exceptions of the agent node.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    AgentError
    ├── AgentConfigError        (ConfigurationError) the catalog entry or the flags cannot
    │                           make this agent
    ├── InboundError            (InputError) an inbound event cannot become a prompt
    │                           (counted, never fatal)
    ├── TauProtocolError        (InputError) τ wrote something the RPC protocol does not allow
    │   └── TauRpcError         (RefusedError) τ answered a request with a JSON-RPC error
    ├── TauExited               (UnavailableError) the τ process is gone (exit code, last
    │                           stderr lines)
    ├── InboxMissing            (UnavailableError) the event log holds the rail but not the
    │                           agent's durable consumer (the substrate makes it)
    ├── SessionError            (UnavailableError) τ could not be moved onto a device's
    │                           conversation
    ├── SessionBookError        (InputError) the device → conversation map or the turn
    │                           ledger on disk cannot be read
    ├── ConversationNotFound    (RefusedError) no kept conversation has the id asked for
    └── RestartBudgetExhausted  (UnavailableError) the restart policy allows no further restart
"""

from __future__ import annotations

from shared.errors import (
    ConfigurationError,
    InputError,
    RefusedError,
    TetherError,
    UnavailableError,
)


class AgentError(TetherError):
    """Base of every error raised by :mod:`home.agents`."""


class AgentConfigError(AgentError, ConfigurationError):
    """A node spec, an extension file or a flag cannot make a runnable agent."""


class InboundError(AgentError, InputError):
    """An event on the agent's inbound rail cannot become a prompt."""


class TauProtocolError(AgentError, InputError):
    """τ wrote a line that is not valid JSON-RPC 2.0 for this protocol version."""


class TauRpcError(TauProtocolError, RefusedError):
    """τ answered a request with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str) -> None:
        self.method = method
        self.code = code
        self.message = message
        super().__init__(f"τ refused {method!r}: {code} {message}")


class TauExited(AgentError, UnavailableError):
    """The τ process exited (or was killed) while the node still needed it."""

    def __init__(self, returncode: int | None, stderr_tail: str = "") -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        tail = f"; last stderr: {stderr_tail.strip()[-400:]}" if stderr_tail.strip() else ""
        super().__init__(f"τ exited with code {returncode}{tail}")


class InboxMissing(AgentError, UnavailableError):
    """The event log holds the agent's rail but not its durable inbox consumer, which only
    the substrate may make (home/substrate/agent_inboxes.py)."""


class SessionError(AgentError, UnavailableError):
    """τ could not be moved onto a device's conversation (a store that does not answer,
    a reply the node cannot read)."""


class SessionBookError(AgentError, InputError):
    """``sessions.json`` or ``turns.jsonl`` of an agent holds something unreadable."""


class ConversationNotFound(AgentError, RefusedError):
    """No conversation kept under the data directory has the id (or id prefix) asked for."""


class RestartBudgetExhausted(AgentError, UnavailableError):
    """More restarts inside the policy's window than ``max_restarts`` allows."""
