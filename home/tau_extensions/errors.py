"""Exceptions of the extension files.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    ExtensionError
    ├── BindingFileError   (InputError) the node's per-run binding file is missing or malformed
    └── AckError           an ack never came, or came saying the effector failed
"""

from __future__ import annotations

from shared.errors import InputError, TetherError


class ExtensionError(TetherError):
    """Base of every error raised by :mod:`home.tau_extensions`."""


class BindingFileError(ExtensionError, InputError):
    """The per-run binding file is missing, unreadable or malformed."""


class AckError(ExtensionError):
    """A verb's ack did not arrive in time, or reported failure."""
