"""Exceptions of :mod:`home.memory` (tree drawn in the package docstring)."""

from __future__ import annotations


class MemoryReflexError(Exception):
    """Base of every error raised by :mod:`home.memory`."""


class MemoryConfigError(MemoryReflexError):
    """A reflex config key is missing, mistyped or out of range."""


class MemoryStoreError(MemoryReflexError):
    """JMFTS could not be reached, or answered a request with an error."""

    def __init__(self, method: str, path: str, status: int, detail: object) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.detail = detail
        where = "unreachable" if status == 0 else f"-> {status}"
        super().__init__(f"JMFTS {method} {path} {where}: {detail}")

    @property
    def not_found(self) -> bool:
        """404: absent, or not granted to this principal (JMFTS does not say which)."""
        return self.status == 404


class LedgerError(MemoryReflexError):
    """The search ledger or the review book cannot be read or written."""


class KeepGateError(MemoryReflexError):
    """The keep gate's examples cannot be read, or its embedder cannot load or embed."""


class RestatementError(MemoryReflexError):
    """The model asked to restate an utterance as a fact did not answer with one."""
