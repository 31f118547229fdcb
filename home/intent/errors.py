"""Exceptions of :mod:`home.intent`."""

from __future__ import annotations

from shared.errors import TetherError


class IntentError(TetherError):
    """The intent step's examples cannot be read, or its embedder cannot load or embed
    (the message names the file and key, or the embedder's failure)."""
