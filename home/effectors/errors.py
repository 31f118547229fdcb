"""Exceptions of the effectors (tree drawn in :mod:`home.effectors`)."""

from __future__ import annotations

from shared.errors import ConfigurationError, TetherError


class EffectorError(TetherError):
    """Base of every error raised by :mod:`home.effectors`."""


class CredentialError(EffectorError, ConfigurationError):
    """The agent has no usable JMFTS token in the token directory."""
