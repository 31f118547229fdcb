"""Exceptions of :mod:`home.reminders`."""

from __future__ import annotations

from shared.errors import TetherError


class ReminderError(TetherError):
    """A reminder that cannot be made, read or found (the message names the field or id)."""


class NoTimeSaid(ReminderError):
    """A request to be reminded that says no time (or one past, or too far ahead)."""
