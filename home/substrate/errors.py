"""The substrate's exceptions.

    SubstrateError
    ├── HomeAlreadyRunning   a second ``home up`` on a data directory that is in use
    ├── HomeNotRunning       no running home found through a data directory
    ├── ComponentError       a component failed to start or answer its health check
    │   └── HomeConfigError  what home was given to start with is invalid (catalog, schema)
    ├── LaunchError          a node could not be started (bad config, missing program)
    ├── ControlError         a control request failed (carries the remote error code)
    │   └── ControlTimeout   the control subject did not answer in time
    └── SchemaRuntimeError   an apply or unapply was refused
        ├── OverlapRefused   two schemas would publish the same rail for one device
        └── SchemaNotFound   no such schema to apply, or no such active schema to unapply

Third-party failures (nats-py, OSError from subprocesses) are translated into
these at the module that meets them.
"""

from __future__ import annotations


class SubstrateError(Exception):
    """Base of every error raised by :mod:`home.substrate`."""


class HomeAlreadyRunning(SubstrateError):
    """Another ``home up`` holds the data directory."""


class HomeNotRunning(SubstrateError):
    """No running home could be found through the data directory."""


class ComponentError(SubstrateError):
    """A supervised component failed to start, stop or answer its health check."""


class HomeConfigError(ComponentError):
    """The catalog or a schema named at start is invalid; the message names file and line."""


class LaunchError(SubstrateError):
    """A node could not be started (bad config, missing program)."""


class ControlError(SubstrateError):
    """A request on ``home.control.>`` failed; ``code`` is the remote error code."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class ControlTimeout(ControlError):
    """The control subject did not answer within the timeout."""


class SchemaRuntimeError(SubstrateError):
    """An activation schema cannot be applied or unapplied; the message says why."""

    code = "refused"


class OverlapRefused(SchemaRuntimeError):
    """Applying a schema would make two active schemas publish one rail for one device."""

    code = "overlap"


class SchemaNotFound(SchemaRuntimeError):
    """The named schema is not in the schema directory, or not active."""

    code = "not_found"
