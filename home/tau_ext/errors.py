"""Exceptions of the extension files (tree drawn in :mod:`home.tau_ext`)."""

from __future__ import annotations


class ExtensionError(Exception):
    """Base of every error raised by :mod:`home.tau_ext`."""


class BindingFileError(ExtensionError):
    """The per-run binding file is missing, unreadable or malformed."""


class AckError(ExtensionError):
    """A verb's ack did not arrive in time, or reported failure."""
