"""Exceptions of :mod:`home.memory` (tree drawn in the package docstring)."""

from __future__ import annotations

from shared.errors import ConfigurationError, InputError, TetherError


class MemoryReflexError(TetherError):
    """Base of every error raised by :mod:`home.memory`."""


class MemoryConfigError(MemoryReflexError, ConfigurationError):
    """A reflex config key is missing, mistyped or out of range."""


class LedgerError(MemoryReflexError):
    """The search ledger or the review book cannot be read or written."""


class LedgerUnreadable(LedgerError, InputError):
    """The search ledger or the review book cannot be read, or a record of it is malformed
    (the message names the file, and the line when there is one)."""


class KeepGateError(MemoryReflexError):
    """The keep gate's examples cannot be read, or its embedder cannot load or embed."""


class RestatementError(MemoryReflexError):
    """``home memory judge`` could not ask the home's evaluator: its model config is
    unreadable, or the model gave no chat completion."""
