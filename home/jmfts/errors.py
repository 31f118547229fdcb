"""JMFTS's exceptions, one tree; each carries the HTTP status it maps to.

JmftsError
├── InvalidInput        a request names something malformed (400/422)
├── Unauthorized        no bearer token, or one that is unknown, revoked or expired (401)
├── Forbidden           visible to the principal but not writable by it (403)
├── NotFound            absent, or not granted to the principal: the two are one answer (404)
├── Conflict            collides with state: a workspace edit, a taken name (409)
├── StoreMismatch       the data dir was built with another embedder model or dimension
└── EmbedderError       the embedder cannot be loaded or run (missing ONNX graph, bad checksum)
"""

from __future__ import annotations


class JmftsError(Exception):
    """Base of every error raised by :mod:`home.jmfts`."""

    status_code = 500


class InvalidInput(JmftsError):
    """The request is malformed; the message names the field."""

    status_code = 400


class Unauthorized(JmftsError):
    """No usable bearer token."""

    status_code = 401


class Forbidden(JmftsError):
    """The principal may read this document but not write it."""

    status_code = 403


class NotFound(JmftsError):
    """The object does not exist *for this principal* (absent or not granted)."""

    status_code = 404


class Conflict(JmftsError):
    """The request collides with existing state."""

    status_code = 409


class StoreMismatch(JmftsError):
    """The stored vectors were made by a different embedder (model or dimension)."""


class EmbedderError(JmftsError):
    """The embedder's graph or tokenizer is missing, corrupt or failing."""
