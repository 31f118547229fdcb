"""Exceptions of the effectors (tree drawn in :mod:`home.effectors`)."""

from __future__ import annotations

from typing import Any


class EffectorError(Exception):
    """Base of every error raised by :mod:`home.effectors`."""


class JmftsError(EffectorError):
    """JMFTS answered with an error status, or could not be reached (``status`` 0)."""

    def __init__(self, method: str, path: str, status: int, detail: Any) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.detail = detail
        reached = f"HTTP {status}" if status else "unreachable"
        super().__init__(f"JMFTS {method} {path}: {reached}: {detail}")


class CredentialError(EffectorError):
    """The agent has no usable JMFTS token in the token directory."""
