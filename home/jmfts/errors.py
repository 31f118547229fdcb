"""JMFTS's exceptions, one tree for the server and its client.

The server raises them and answers with each class's ``status_code``; the client
(:mod:`home.jmfts.client`) raises the same classes for the answers it gets, with the
request's ``method``, ``path``, the ``status`` that came back and the server's ``detail``.

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
    ├── Unreachable         (UnavailableError) the client got no answer: connection refused,
    │                       timeout (status 0)
    ├── MalformedAnswer     (UnavailableError) the client got an answer that is not what the
    │                       API promises
    ├── StoreMismatch       (ConfigurationError) the data dir was built with another embedder
    │                       model or dimension
    ├── EmbedderError       (UnavailableError) the embedder cannot be loaded or run (missing
    │                       ONNX graph, bad checksum)
    ├── BatcherClosed       (UnavailableError) a write arrived while the store closes (503),
    │                       in :mod:`home.jmfts.write_batcher`
    └── LogUnavailable      (UnavailableError) a clustered memory's log did not take a write,
                            or this member has not applied it in time (503)
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
    """Base of every error raised by :mod:`home.jmfts`.

    ``status`` is the HTTP status the error stands for: the one a client received
    (0 when none came), else the class's ``status_code``.
    """

    status_code = 500

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        detail: object = None,
    ) -> None:
        super().__init__(message)
        self.method = method
        self.path = path
        self.status = self.status_code if status is None else status
        self.detail = message if detail is None else detail


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


class Unreachable(JmftsError, UnavailableError):
    """No answer from the server: the connection was refused, dropped or timed out."""

    status_code = 503


class MalformedAnswer(JmftsError, UnavailableError):
    """The server answered, but not with JSON of the promised shape."""

    status_code = 502


class StoreMismatch(JmftsError, ConfigurationError):
    """The stored vectors were made by a different embedder (model or dimension)."""


class EmbedderError(JmftsError, UnavailableError):
    """The embedder's graph or tokenizer is missing, corrupt or failing."""


class LogUnavailable(JmftsError, UnavailableError):
    """A clustered memory's replicated log did not take a write, or this member could not
    apply it (or catch up) in time (:mod:`home.jmfts.replicated_log`)."""

    status_code = 503


_REFUSALS: tuple[type[JmftsError], ...] = (
    InvalidInput,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
)
_BY_STATUS: dict[int, type[JmftsError]] = {cls.status_code: cls for cls in _REFUSALS}
_BY_STATUS[422] = InvalidInput


def refusal(method: str, path: str, status: int, detail: object) -> JmftsError:
    """The error for a request the server answered with ``status`` (>= 400)."""
    cls = _BY_STATUS.get(status, JmftsError)
    return cls(
        f"JMFTS {method} {path} -> {status}: {detail}",
        method=method,
        path=path,
        status=status,
        detail=detail,
    )
