"""The substrate's exceptions.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    SubstrateError
    ├── HomeAlreadyRunning   (RefusedError) a second ``home up`` on a data directory that is
    │                        in use
    ├── HomeConfigError      (ConfigurationError) what home was given to start with is invalid
    │                        (catalog, schema)
    ├── ComponentError       (UnavailableError) a component failed to start or answer its
    │                        health check
    ├── LaunchError          (UnavailableError) a node could not be started (bad config,
    │                        missing program, a component it needs is not running)
    ├── MemberRecordError    (InputError) a record in the members' bucket does not parse
    ├── ControlError         a control request failed (carries the remote error code); the
    │   │                    reply's code picks the class (home/substrate/control.py)
    │   ├── ControlTimeout   (UnavailableError) the control subject did not answer in time
    │   ├── ControlBadRequest (InputError) ``bad_request``, ``not_found``: what was asked is
    │   │                    malformed or names nothing there is
    │   └── ControlRefused   (RefusedError) ``refused``, ``overlap``: home would not do it
    └── SchemaRuntimeError   (RefusedError) an apply or unapply was refused
        ├── OverlapRefused   two schemas would publish the same rail for one device
        └── SchemaNotFound   no such schema to apply, or no such active schema to unapply

No running home found through a data directory is :class:`shared.errors.HomeNotRunning`:
the edge meets it too.

Third-party failures (nats-py, OSError from subprocesses) are translated into
these at the module that meets them.
"""

from __future__ import annotations

from shared.errors import (
    ConfigurationError,
    InputError,
    RefusedError,
    TetherError,
    UnavailableError,
)


class SubstrateError(TetherError):
    """Base of every error raised by :mod:`home.substrate`."""


class HomeAlreadyRunning(SubstrateError, RefusedError):
    """Another ``home up`` holds the data directory."""


class HomeConfigError(SubstrateError, ConfigurationError):
    """The catalog or a schema named at start is invalid; the message names file and line."""


class ComponentError(SubstrateError, UnavailableError):
    """A supervised component failed to start, stop or answer its health check."""


class LaunchError(SubstrateError, UnavailableError):
    """A node could not be started (bad config, missing program, a needed component down)."""


class MemberRecordError(SubstrateError, InputError):
    """A record in the members' bucket does not parse (names the key and the field)."""


class ControlError(SubstrateError):
    """A request on ``home.control.>`` failed; ``code`` is the remote error code."""

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


class SchemaRuntimeError(SubstrateError, RefusedError):
    """An activation schema cannot be applied or unapplied; the message says why."""

    code = "refused"


class OverlapRefused(SchemaRuntimeError):
    """Applying a schema would make two active schemas publish one rail for one device."""

    code = "overlap"


class SchemaNotFound(SchemaRuntimeError):
    """The named schema is not in the schema directory, or not active."""

    code = "not_found"
