"""Exceptions of the effectors (tree drawn in :mod:`home.effectors`)."""

from __future__ import annotations


class EffectorError(Exception):
    """Base of every error raised by :mod:`home.effectors`."""


class CredentialError(EffectorError):
    """The agent has no usable JMFTS token in the token directory."""
