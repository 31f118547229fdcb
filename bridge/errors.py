"""The bridge's exceptions, one tree for the whole package.

Under :class:`shared.errors.TetherError`; the umbrella each class also belongs to is
in parentheses::

    BridgeError
    ├── ProtocolError        a frame or hello that breaks PROTOCOL.md
    │   ├── FrameError       (InputError) a malformed, oversize or undecodable frame
    │   └── HelloRefused     (RefusedError) the peer's half (or ours, as the peer says) was
    │                        refused at hello
    ├── LinkError            (LinkError) the link to the peer failed (closed, timed out,
    │                        unreachable)
    ├── TransportRefused     (RefusedError) the SSH layer refused something (key, host key,
    │                        channel)
    ├── Refused              (RefusedError) one event refused by this half's policy;
    │   │                    ``reason`` is a counter key
    │   └── OutboxFull       the bounded outbox has no room for another event
    ├── PairError            (InputError) `bridge pair` cannot write what it was asked to
    └── ClockSettingError    (ConfigurationError) TETHER_CLOCK_SYNCED is neither yes nor no

Foreign exceptions (asyncssh, nats, zstandard, OSError) are translated into
these at the boundary where they arise.
"""

from __future__ import annotations

from shared import errors
from shared.errors import ConfigurationError, InputError, RefusedError, TetherError


class BridgeError(TetherError):
    """Base of every error raised by :mod:`bridge`."""


class ProtocolError(BridgeError):
    """The peer broke the frame protocol (PROTOCOL.md)."""


class FrameError(ProtocolError, InputError):
    """A frame is malformed, over the size limit, or does not decompress."""


class HelloRefused(ProtocolError, RefusedError):
    """The hello exchange failed; ``findings`` lists each difference found."""

    def __init__(self, message: str, findings: tuple[str, ...] = ()) -> None:
        self.message = message
        self.findings = findings
        detail = "".join(f"\n  - {f}" for f in findings)
        super().__init__(f"{message}{detail}")


class LinkError(BridgeError, errors.LinkError):
    """The link to the peer is gone: closed, silent past the heartbeat timeout, or unreachable."""


class TransportRefused(BridgeError, RefusedError):
    """The SSH transport refused something: a key, a host key, a channel or request."""


class Refused(BridgeError, RefusedError):
    """One event refused by this half; ``reason`` names the counter it is counted under."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


class OutboxFull(Refused):
    """The outbox holds its maximum of unacknowledged events."""

    def __init__(self, capacity: int) -> None:
        super().__init__("outbox_full", f"the outbox already holds {capacity} unacked events")


class Unstored(Refused):
    """The durable outbox could not commit the event; ``detail`` names the file and why."""

    def __init__(self, detail: str) -> None:
        super().__init__("unstored", detail)


class PairError(BridgeError, InputError):
    """`bridge pair` cannot do what it was asked (bad device, keys under schemas/, ...)."""


class ClockSettingError(BridgeError, ConfigurationError):
    """The override of whether this side's clock is synced says neither yes nor no."""
