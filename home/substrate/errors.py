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
    ├── PairingEntryError    (InputError) an entry of the pairing bucket cannot be applied
    └── SchemaRuntimeError   (RefusedError) an apply or unapply was refused
        ├── OverlapRefused   two schemas would publish the same rail for one device
        └── SchemaNotFound   no such schema to apply, or no such active schema to unapply

No running home found through a data directory is :class:`shared.errors.HomeNotRunning`,
and a failed control request a :class:`shared.errors.ControlError` of the class its
reply's code maps to (``shared/control.py``): the edge meets both too.

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


class PairingEntryError(SubstrateError, InputError):
    """An entry of the ``HOME_PAIRING`` bucket this member will not apply (names the key
    and why: not JSON, sealed under another password, a half that does not load...)."""


class SchemaRuntimeError(SubstrateError, RefusedError):
    """An activation schema cannot be applied or unapplied; the message says why."""

    code = "refused"


class OverlapRefused(SchemaRuntimeError):
    """Applying a schema would make two active schemas publish one rail for one device."""

    code = "overlap"


class SchemaNotFound(SchemaRuntimeError):
    """The named schema is not in the schema directory, or not active."""

    code = "not_found"
