"""The TUI's exceptions.

Under :class:`edge.errors.EdgeError`; the umbrella a class also belongs to is in
parentheses::

    TuiError
    ├── TransportError     (LinkError) the NATS URL cannot be reached, or the bridge path
    │                      cannot start
    └── TurnTimeout        (UnavailableError) no speak or reply arrived for a binding_id
                           within the timeout

Malformed events are not exceptions here: :mod:`shared.errors` raises
``EnvelopeError`` while parsing, and the session counts and logs them.
"""

from __future__ import annotations

from edge.errors import EdgeError
from shared.errors import LinkError, UnavailableError


class TuiError(EdgeError):
    """Base of every error raised by :mod:`edge.tui`."""


class TransportError(TuiError, LinkError):
    """The NATS the TUI talks to cannot be reached, or the bridge path failed to start."""


class TurnTimeout(TuiError, UnavailableError):
    """No answer (speak or reply) for ``binding_id`` arrived within ``timeout_s``."""

    def __init__(self, binding_id: str, timeout_s: float) -> None:
        self.binding_id = binding_id
        self.timeout_s = timeout_s
        super().__init__(
            f"timeout: no speak or reply for binding {binding_id} within {timeout_s:g} s"
        )
