"""JMFTS's exceptions, one tree; each carries the HTTP status it maps to.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    JmftsError
    ├── InvalidInput        (InputError) a request names something malformed (400/422)
    ├── Unauthorized        (RefusedError) no bearer token, or one that is unknown, revoked
    │                       or expired (401)
    ├── Forbidden           (RefusedError) visible to the principal but not writable by it (403)
    ├── NotFound            (RefusedError) absent, or not granted to the principal: the two
    │                       are one answer (404)
    ├── Conflict            (RefusedError) collides with state: a workspace edit, a taken
    │                       name (409)
    ├── StoreMismatch       (ConfigurationError) the data dir was built with another embedder
    │                       model or dimension
    ├── EmbedderError       (UnavailableError) the embedder cannot be loaded or run (missing
    │                       ONNX graph, bad checksum)
    └── BatcherClosed       (UnavailableError) a write arrived while the store closes (503),
                            in :mod:`home.jmfts.write_batcher`
"""

from __future__ import annotations

from shared.errors import (
    ConfigurationError,
    InputError,
    RefusedError,
    TetherError,
    UnavailableError,
)


class JmftsError(TetherError):
    """Base of every error raised by :mod:`home.jmfts`."""

    status_code = 500


class InvalidInput(JmftsError, InputError):
    """The request is malformed; the message names the field."""

    status_code = 400


class Unauthorized(JmftsError, RefusedError):
    """No usable bearer token."""

    status_code = 401


class Forbidden(JmftsError, RefusedError):
    """The principal may read this document but not write it."""

    status_code = 403


class NotFound(JmftsError, RefusedError):
    """The object does not exist *for this principal* (absent or not granted)."""

    status_code = 404


class Conflict(JmftsError, RefusedError):
    """The request collides with existing state."""

    status_code = 409


class StoreMismatch(JmftsError, ConfigurationError):
    """The stored vectors were made by a different embedder (model or dimension)."""


class EmbedderError(JmftsError, UnavailableError):
    """The embedder's graph or tokenizer is missing, corrupt or failing."""
