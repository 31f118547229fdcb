"""The firmware package's exceptions.

Under :class:`shared.errors.TetherError`; the umbrella a class also belongs to is in
parentheses::

    FirmwareError
    ├── HostToolError        (UnavailableError) a host tool is missing, or binfmt_misc cannot
    │                        run arm64 code
    ├── BuildError           a build stage failed (names the stage and the command)
    ├── LayoutError          (InputError) the disk layout cannot hold what it is given
    ├── ManifestError        (InputError) a manifest is missing, malformed, or disagrees with
    │                        its image
    ├── FlashRefused         (RefusedError) `firmware flash` refuses a target (mounted, system
    │                        disk, too large, ...)
    ├── VerifyError          read-back or re-check found a different sha256
    └── BootTestError        the image did not boot to readiness under emulation
"""

from __future__ import annotations

from shared.errors import InputError, RefusedError, TetherError, UnavailableError


class FirmwareError(TetherError):
    """Base of every error raised by :mod:`firmware`."""


class HostToolError(FirmwareError, UnavailableError):
    """A tool the build needs on this machine is missing or cannot run."""


class BuildError(FirmwareError):
    """A build stage failed; ``stage`` names it."""

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(f"{stage}: {message}")


class LayoutError(FirmwareError, InputError):
    """The requested disk layout is impossible (sizes, alignment, contents)."""


class ManifestError(FirmwareError, InputError):
    """A manifest is missing or malformed, or does not describe its image."""


class FlashRefused(FirmwareError, RefusedError):
    """`firmware flash` will not write to the given target; the message says why."""


class VerifyError(FirmwareError):
    """The bytes read back do not hash to the expected sha256."""


class BootTestError(FirmwareError):
    """The image did not reach readiness (or SSH did not answer) under emulation."""
