"""The endpointer: a pure state machine from frames and button presses to utterances.

Voice activity is frame energy against a threshold in dBFS, with hysteresis:
speech starts after ``start_ms`` of loud frames (a pre-roll of earlier frames is
kept so the first syllable is not lost) and ends after ``end_silence_ms`` of
quiet ones, or at ``max_utterance_s``. It ends sooner, after ``stable_end_ms`` of
quiet, when the recognizer says (:meth:`Endpointer.on_decoded`) that it has decoded
that quiet and its transcript, not empty, did not change in it (a change decoded from
the first block of quiet is the recognizer catching up with the last word, and does
not count): the words are in, and waiting out the rest of the silence would only add
to the person's wait.
While the push-to-talk button is held, the button alone decides: press opens an
utterance (or takes over an open one), release closes it.

In mode ``wake`` voice activity opens an utterance only while the endpointer is
armed (:meth:`Endpointer.arm`): by the wake word, or by the follow-up window
after the board answered. Arming by the wake word forgets the audio before it,
so the wake word is not part of the turn; closing an utterance disarms.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

import numpy as np

from edge.audio.base import AudioFrame
from edge.config import EndpointMode, VadConfig

EndReason = Literal["vad", "max_length", "push_to_talk", "end_of_input", "echo_gate"]
StartReason = Literal["vad", "push_to_talk", "wake", "follow_up"]

_SILENT_DB = -120.0


@dataclass(frozen=True)
class UtteranceStart:
    """An utterance opens; ``at`` is the monotonic time of its first sample.

    ``wake_probability``: how sure the wake word model was, when a wake word armed it.
    """

    at: float
    reason: StartReason
    wake_probability: float | None = None


@dataclass(frozen=True)
class UtteranceAudio:
    """One frame of an open utterance."""

    frame: AudioFrame


@dataclass(frozen=True)
class UtteranceEnd:
    """The utterance closes; ``speech_ended_at`` is when the voice stopped, ``at`` the decision.

    ``level_db``: the power mean of its voiced frames (how loudly this board heard it).
    """

    at: float
    speech_ended_at: float
    reason: EndReason
    level_db: float = _SILENT_DB


SegmentEvent = UtteranceStart | UtteranceAudio | UtteranceEnd


def frame_level_db(pcm: bytes) -> float:
    """RMS level of 16-bit PCM in dB relative to full scale (-120 for digital silence)."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    if not len(samples):
        return _SILENT_DB
    rms = math.sqrt(float(np.mean(samples * samples))) / 32768.0
    return max(_SILENT_DB, 20.0 * math.log10(rms)) if rms > 0 else _SILENT_DB


def _power(pcm: bytes) -> float:
    """Mean square of 16-bit PCM, relative to full scale."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768.0
    return float(np.mean(samples * samples)) if len(samples) else 0.0


class Endpointer:
    """Turns frames and button presses into :data:`SegmentEvent` s."""

    def __init__(self, mode: EndpointMode, vad: VadConfig) -> None:
        self.mode = mode
        self.vad = vad
        self._use_vad = mode in ("vad", "both", "wake")
        self._wake = mode == "wake"
        # Mode wake: voice opens an utterance only until this monotonic time.
        self._armed_until = 0.0
        self._armed_by: StartReason = "wake"
        self._wake_probability: float | None = None
        self._voiced_power: list[float] = []  # of the open utterance's loud frames
        self._open = False
        self._held = False
        self._started_at = 0.0
        self._loud_s = 0.0
        self._quiet_s = 0.0
        self._last_voice_end = 0.0
        # What the recognizer has decoded of this utterance, in audio (monotonic) time.
        self._decoded_until = 0.0
        self._transcript_changed_at = 0.0
        self._has_words = False
        self._block_s = 0.0  # the length of the last frame
        self._pre_roll: deque[AudioFrame] = deque()
        self._pending: list[AudioFrame] = []  # loud frames before the start is confirmed

    @property
    def is_open(self) -> bool:
        """True while an utterance is open."""
        return self._open

    @property
    def held(self) -> bool:
        """True while the push-to-talk button is down."""
        return self._held

    def arm(self, until: float, reason: StartReason, probability: float | None = None) -> None:
        """Mode wake: let voice open an utterance until ``until`` (the wake word, a follow-up).

        A wake word also forgets the frames before it: the wake word is not part of the turn.
        """
        if self._open:
            return
        self._armed_until, self._armed_by = until, reason
        self._wake_probability = probability
        if reason == "wake":
            self._reset_listening()

    def armed(self, at: float) -> bool:
        """Whether voice heard at monotonic ``at`` may open an utterance."""
        return not self._wake or at <= self._armed_until

    def on_frame(self, frame: AudioFrame) -> list[SegmentEvent]:
        """Feed one admitted frame."""
        if self._open:
            return self._in_utterance(frame)
        if self._use_vad and not self._held:
            return self._listening(frame)
        return []

    def on_decoded(
        self, until: float, changed: bool, has_words: bool, at: float
    ) -> list[SegmentEvent]:
        """The recognizer decoded the audio up to ``until``; its transcript ``changed`` in it.

        Closes the utterance (decided at monotonic ``at``) when the transcript has settled:
        ``stable_end_ms`` of decoded quiet after the voice, words heard, none changed in it.
        """
        if not self._open or self._held:
            return []
        self._decoded_until = max(self._decoded_until, until)
        if changed:
            # The recognizer names a word a block after the audio that held it: a change
            # decoded from the first block of quiet is it catching up with the last word.
            catching_up = until <= self._last_voice_end + self._block_s + 1e-6
            self._transcript_changed_at = self._last_voice_end if catching_up else until
        self._has_words = has_words
        # A microsecond's slack: frame times are sums of float durations.
        window_s = self.vad.stable_end_ms / 1000 - 1e-6
        settled = (
            self.vad.stable_end_ms > 0
            and self._use_vad
            and has_words
            and self._decoded_until - self._last_voice_end >= window_s
            and self._quiet_s >= window_s
            and self._transcript_changed_at <= self._decoded_until - window_s
        )
        return self._close(at, self._last_voice_end, "vad") if settled else []

    def on_button(self, pressed: bool, at: float) -> list[SegmentEvent]:
        """The push-to-talk button went down (``pressed``) or up at monotonic time ``at``."""
        if self.mode == "vad":
            return []
        self._held = pressed
        if pressed:
            if self._open:
                return []  # the button takes over the utterance VAD opened
            self._reset_listening()
            self._open, self._started_at = True, at
            self._last_voice_end = at
            return [UtteranceStart(at, "push_to_talk")]
        if self._open:
            return self._close(at, at, "push_to_talk")
        return []

    def cut(self, at: float, reason: EndReason) -> list[SegmentEvent]:
        """Close an open utterance now (end of input, or the echo gate shut the microphone)."""
        if not self._open:
            self._reset_listening()
            return []
        return self._close(at, self._last_voice_end if not self._held else at, reason)

    def _listening(self, frame: AudioFrame) -> list[SegmentEvent]:
        loud = frame_level_db(frame.pcm) >= self.vad.threshold_db
        if not loud or not self.armed(frame.captured_at):
            self._loud_s = 0.0
            self._pre_roll.extend(self._pending)
            self._pending.clear()
            self._remember(frame)
            return []
        self._loud_s += frame.duration_s
        self._pending.append(frame)
        if self._loud_s * 1000 < self.vad.start_ms:
            return []
        frames = [*self._pre_roll, *self._pending]
        self._voiced_power = [_power(f.pcm) for f in self._pending]
        self._reset_listening()
        self._open, self._started_at = True, frames[0].captured_at
        self._last_voice_end = frame.ends_at
        start = (
            UtteranceStart(self._started_at, self._armed_by, self._wake_probability)
            if self._wake
            else UtteranceStart(self._started_at, "vad")
        )
        return [start, *(UtteranceAudio(f) for f in frames)]

    def _remember(self, frame: AudioFrame) -> None:
        self._pre_roll.append(frame)
        while self._pre_roll and (
            frame.ends_at - self._pre_roll[0].captured_at > self.vad.pre_roll_ms / 1000
        ):
            self._pre_roll.popleft()

    def _in_utterance(self, frame: AudioFrame) -> list[SegmentEvent]:
        events: list[SegmentEvent] = [UtteranceAudio(frame)]
        self._block_s = frame.duration_s
        if self._held:
            self._last_voice_end = frame.ends_at
            return events
        if frame_level_db(frame.pcm) >= self.vad.threshold_db:
            self._voiced_power.append(_power(frame.pcm))
            self._quiet_s = 0.0
            self._last_voice_end = frame.ends_at
        else:
            self._quiet_s += frame.duration_s
        if self._quiet_s * 1000 >= self.vad.end_silence_ms:
            events += self._close(frame.ends_at, self._last_voice_end, "vad")
        elif frame.ends_at - self._started_at >= self.vad.max_utterance_s:
            events += self._close(frame.ends_at, self._last_voice_end, "max_length")
        return events

    def _close(self, at: float, speech_ended_at: float, reason: EndReason) -> list[SegmentEvent]:
        self._open = False
        self._quiet_s = 0.0
        self._reset_listening()
        self._armed_until, self._wake_probability = 0.0, None
        power, self._voiced_power = self._voiced_power, []
        level = 10 * math.log10(sum(power) / len(power)) if power and sum(power) > 0 else _SILENT_DB
        return [UtteranceEnd(at, speech_ended_at, reason, max(_SILENT_DB, level))]

    def _reset_listening(self) -> None:
        self._decoded_until = self._transcript_changed_at = 0.0
        self._has_words = False
        self._loud_s = 0.0
        self._pre_roll.clear()
        self._pending.clear()
