"""This side's wall clock: what it reads, and whether the kernel counts it synced.

The hello carries both (bridge/PROTOCOL.md "Clocks"). Whether the clock is synced is
asked of the kernel: ``adjtimex(2)`` with no mode bits set only reads, needs no
privilege, and answers ``TIME_ERROR`` while the clock is unsynchronized, which is what
``timedatectl``'s ``NTPSynchronized`` reports too, without systemd or D-Bus. Where the
kernel cannot be asked, the clock is not counted as synced: the peer then judges this
side's events on its own clock, which changes nothing when the clocks agree.

``TETHER_CLOCK_SYNCED=yes`` or ``no`` overrides the kernel's answer (a board whose
clock is set by other means, a test); tests inject a whole :class:`WallClock`.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bridge.errors import ClockSettingError
from bridge.protocol import ClockReading

CLOCK_SYNCED_ENV = "TETHER_CLOCK_SYNCED"
_OVERRIDES = {"yes": True, "no": False}
# adjtimex's answer while the kernel's clock is unsynchronized (STA_UNSYNC).
_TIME_ERROR = 5
# Larger than ``struct timex`` on every Linux architecture; zeroed, so ``modes`` is 0.
_TIMEX_BYTES = 1024


def kernel_clock_synced() -> bool:
    """True when the kernel says its clock is synchronized; False if not, or if it cannot say."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        adjtimex = ctypes.CDLL(None, use_errno=True).adjtimex
    except (OSError, AttributeError):
        return False
    state = int(adjtimex(ctypes.create_string_buffer(_TIMEX_BYTES)))
    return 0 <= state < _TIME_ERROR


def synced_probe(environ: Mapping[str, str] | None = None) -> Callable[[], bool]:
    """How this side tells whether its clock is synced: the environment's override, or the kernel.

    Raises :class:`ClockSettingError` for an override that is neither ``yes`` nor ``no``.
    """
    env = os.environ if environ is None else environ
    raw = env.get(CLOCK_SYNCED_ENV)
    if raw is None or raw == "":
        return kernel_clock_synced
    said = _OVERRIDES.get(raw.strip().lower())
    if said is None:
        raise ClockSettingError(f"{CLOCK_SYNCED_ENV} must be 'yes' or 'no', got {raw[:40]!r}")
    return lambda: said


@dataclass(frozen=True)
class WallClock:
    """This side's wall clock (epoch seconds) and whether it is synced, asked at each reading."""

    now: Callable[[], float] = time.time
    synced: Callable[[], bool] = field(default_factory=synced_probe)

    def read(self) -> ClockReading:
        """The clock and its synced state now, for a hello or to measure the peer's."""
        return ClockReading(self.now(), self.synced())
