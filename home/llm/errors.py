"""Exceptions of :mod:`home.llm`.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    LlmError
    ├── ModelFileError     (UnavailableError) the GGUF is not installed where its package says
    └── LlmServerError     (UnavailableError) the server would not start, or is not healthy
"""

from __future__ import annotations

from shared.errors import TetherError, UnavailableError


class LlmError(TetherError):
    """Base of every error raised by :mod:`home.llm`."""


class ModelFileError(LlmError, UnavailableError):
    """The model file cannot be found through its package's metadata."""


class LlmServerError(LlmError, UnavailableError):
    """The llama.cpp server did not start, died, or answers unhealthy."""
