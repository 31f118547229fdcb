"""The exit status every tether command ends with, in one place.

``OK`` when the command did what was asked; ``FAILURE`` when it ran but found
problems or could not finish (a check with findings, a failed suite, a component
that would not start); ``USAGE`` when what it was given is unusable (a bad flag, a
malformed file, an install without the extra it needs).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """A command's exit status: 0 ok, 1 findings or failure, 2 bad usage or input."""

    OK = 0
    FAILURE = 1
    USAGE = 2
