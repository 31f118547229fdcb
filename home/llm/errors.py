"""Exceptions of :mod:`home.llm` (tree drawn in the package docstring)."""

from __future__ import annotations


class LlmError(Exception):
    """Base of every error raised by :mod:`home.llm`."""


class ModelFileError(LlmError):
    """The model file cannot be found through its package's metadata."""


class LlmServerError(LlmError):
    """The llama.cpp server did not start, died, or answers unhealthy."""
