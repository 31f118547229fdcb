"""Tether's exception root, its category umbrellas, and the wire contract's exceptions.

Every exception tether raises is a :class:`TetherError`. Each package has one root
under it (``EdgeError``, ``BridgeError``, ``JmftsError``, ...); a class whose meaning
falls into a category also subclasses that category's umbrella, so a caller can
catch "any refusal" or "anything unavailable" across packages::

    TetherError
    ├── ConfigurationError   what a program was set up with is invalid or does not fit
    ├── InputError           what a request, message, file or argument carries is malformed
    ├── RefusedError         a well-formed request was refused: policy, permission or state
    ├── UnavailableError     something needed is missing, would not start, or does not answer
    ├── LinkError            the connection to a peer failed, timed out or was lost
    └── <package roots>      ContractError (below), EdgeError, BridgeError, JmftsError, ...

The wire contract's own tree::

    ContractError
    ├── EnvelopeError          (InputError) a field of an event is missing, mistyped or invalid
    │   ├── EnvelopeTooLarge   the serialized event exceeds the configured limit
    │   └── NotTextOnly        audio, bytes, a base64 blob or an oversize string
    ├── SubjectError           (InputError) a subject, pattern or token is malformed
    ├── SchemaError            (ConfigurationError) a YAML document (catalog, activation
    │                          schema, bridge half) is malformed; carries every issue with
    │                          file, line and key
    ├── BusCredentialsError    (ConfigurationError) a bus credentials file is missing or
    │                          unreadable (shared/bus_credentials.py)
    ├── MissingExtra           (ConfigurationError) a console script's install lacks the
    │                          extra it needs (shared/extras.py)
    ├── HomeNotRunning         (UnavailableError) no running home answers from a data
    │                          directory (no state file, a stale one, or its NATS is gone)
    ├── UsageError             (InputError) an option or argument of a command is unusable;
    │                          the message names it
    └── ControlError           a request on home's control surface failed (carries the
        │                      reply's code, which picks the class: shared/control.py)
        ├── ControlTimeout     (UnavailableError) the control subject did not answer in time
        ├── ControlBadRequest  (InputError) ``bad_request``, ``not_found``: what was asked
        │                      is malformed or names nothing there is
        └── ControlRefused     (RefusedError) ``refused``, ``overlap``: home would not do it

How an error ends a command (exit code and message) is decided in one place for every
command line: :mod:`shared.cli`.

Each package's ``errors`` module draws its part of the tree the same way.
"""

from __future__ import annotations

from dataclasses import dataclass


class TetherError(Exception):
    """Base of every error raised by tether."""


class ConfigurationError(TetherError):
    """What a program was set up with (a YAML document, a flag, a data dir) is invalid or unfit."""


class InputError(TetherError):
    """What a request, message, file or argument carries is malformed."""


class RefusedError(TetherError):
    """A well-formed request was refused: by policy, by permission, or by current state."""


class UnavailableError(TetherError):
    """Something needed (a program, server, model, device) is missing, down or not answering."""


class LinkError(TetherError):
    """The connection to a peer could not be made, timed out, or was lost."""


class ContractError(TetherError):
    """Base of every error raised by :mod:`shared`."""


class EnvelopeError(ContractError, InputError):
    """An event envelope failed validation; ``key`` names the offending field."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"envelope key {key!r}: {message}")


class EnvelopeTooLarge(EnvelopeError):
    """The serialized event is larger than the configured limit."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            "<event>", f"serialized event is {size} bytes, over the limit of {limit} bytes"
        )


class NotTextOnly(EnvelopeError):
    """The event carries something that is not text (audio, bytes, a blob, a huge string)."""


class SubjectError(ContractError, InputError):
    """A subject, subject pattern or subject token is malformed."""


@dataclass(frozen=True)
class SchemaIssue:
    """One problem in one YAML document, located by file, line and key path."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class SchemaError(ContractError, ConfigurationError):
    """A YAML document is malformed; ``issues`` lists every problem found."""

    def __init__(self, issues: list[SchemaIssue]) -> None:
        if not issues:
            raise ValueError("SchemaError needs at least one issue")
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


class BusCredentialsError(ContractError, ConfigurationError):
    """A bus credentials file is missing or unreadable (:mod:`shared.bus_credentials`)."""


class MissingExtra(ContractError, ConfigurationError):
    """A console script's install lacks a package of the extra it needs (``tether[home]``)."""


class HomeNotRunning(ContractError, UnavailableError):
    """No running home answers from a data directory: no state file, a stale one, or its
    NATS is gone. The message names the directory and how to start a home there."""


class UsageError(ContractError, InputError):
    """An option or argument of a command is unusable; the message names it (``--device``)."""


class ControlError(ContractError):
    """A request on home's control surface failed; ``code`` is the reply's error code
    (``shared/control.py``), which picks the subclass and so the umbrella."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class ControlTimeout(ControlError, UnavailableError):
    """The control subject did not answer within the timeout."""


class ControlBadRequest(ControlError, InputError):
    """Home answered that the request is malformed or names nothing there is."""


class ControlRefused(ControlError, RefusedError):
    """Home answered that it will not do what was asked (refused, or an overlap)."""
