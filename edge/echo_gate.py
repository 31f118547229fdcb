"""The echo gate: no captured audio reaches the recognizer while the board is speaking.

Pure bookkeeping on monotonic timestamps. The speaker marks when playback
starts and ends; every captured frame that overlaps a speaking interval
(extended by the configured tail, for the room's echo) is refused. A barge-in
ends the interval without a tail: the person pressed the button to talk, and
the speaker has already stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from edge.audio.base import AudioFrame

# Intervals this far behind the newest frame can no longer matter.
_KEEP_S = 30.0


@dataclass
class _Interval:
    start: float
    end: float | None  # None while still speaking (tail included once closed)


class EchoGate:
    """Decides, frame by frame, whether captured audio may reach the recognizer."""

    def __init__(self, tail_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.tail_s = tail_s
        self._clock = clock
        self._intervals: list[_Interval] = []
        self.admitted = 0
        self.dropped = 0

    @property
    def speaking(self) -> bool:
        """True while playback is in progress."""
        return bool(self._intervals) and self._intervals[-1].end is None

    def speaking_started(self, at: float | None = None) -> None:
        """Playback begins now (or at ``at``): shut the microphone."""
        if not self.speaking:
            self._intervals.append(_Interval(self._clock() if at is None else at, None))

    def speaking_ended(self, at: float | None = None, *, barge_in: bool = False) -> None:
        """Playback ended: reopen after the tail (at once on barge-in)."""
        if self.speaking:
            end = self._clock() if at is None else at
            self._intervals[-1].end = end + (0.0 if barge_in else self.tail_s)

    def admits(self, frame: AudioFrame) -> bool:
        """True if no part of ``frame`` was heard while speaking (or in the tail); counts both."""
        self._intervals = [
            i for i in self._intervals if i.end is None or i.end > frame.captured_at - _KEEP_S
        ]
        for interval in self._intervals:
            closes = interval.end if interval.end is not None else float("inf")
            if frame.ends_at > interval.start and frame.captured_at < closes:
                self.dropped += 1
                return False
        self.admitted += 1
        return True
