"""The wake word: a microWakeWord model from the ``pymicro-wakeword`` wheel, frame by frame.

The wheel ships the TensorFlow Lite C library and four models (okay_nabu,
hey_jarvis, hey_mycroft, alexa) for x86_64 and aarch64; they are loaded from
the installed package, never downloaded. A detection is the model's sliding
mean probability over its cutoff; after one, the model's state is reset so the
same wake word is not heard twice (docs/architecture.md "The board listens").

The cutoffs are the wake suite's (``hil run --suite wake``), not the models' own:
each is the lowest that heard no wake word in the suite's tuning hour of background,
accepted at most one near miss more than the model's own cutoff did, and heard its
wake word in none of the other models' wake word clips (a household may own another
assistant); chosen on the tuning half only. ``make bench NAME=wake`` reports both
halves.

The model sleeps through quiet: once a second of audio under ``quiet_db``
(``QUIET_MARGIN_DB`` under the endpointer's speech threshold) has gone through it, quiet
blocks are held back, not run, and the last ``PRE_ROLL_S`` of them go through ahead of
the first louder block. The model has then heard what it would have (a second of quiet
fills its state as an hour does), so it hears a wake word as it would, and a silent room
costs the board no inference at all (docs/architecture.md "The board listens").

The chime that acknowledges a wake is made here too: two short tones, quiet,
so the echo gate shuts the microphone for as little as possible.
"""

from __future__ import annotations

import numpy as np
from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

from edge.audio.base import SAMPLE_WIDTH
from edge.config import VadConfig
from edge.endpoint.segmenter import frame_level_db
from edge.errors import ModelError

WAKE_MODELS = tuple(m.value for m in Model)
# Per model; the models' own (0.85-0.97) missed 16-70 % of the suite's tuning wake words.
# hey_mycroft keeps its own: below it, it hears the board's voice say "Hey Jarvis".
TUNED_CUTOFFS = {"okay_nabu": 0.75, "hey_jarvis": 0.75, "hey_mycroft": 0.95, "alexa": 0.45}
QUIET_MARGIN_DB = 10.0  # quiet: this far under the endpointer's speech threshold
QUIET_HANGOVER_S = 1.0  # of quiet run through the model before quiet is held back
PRE_ROLL_S = 0.3  # of held-back quiet run through ahead of the first louder block
_RATE = 16000  # the models' sample rate
_BYTES_PER_S = _RATE * SAMPLE_WIDTH
_PRE_ROLL_BYTES = round(PRE_ROLL_S * _RATE) * SAMPLE_WIDTH


class WakeWord:
    """One wake word model and its feature frontend; blocking, cheap (~0.3 ms per 100 ms)."""

    def __init__(
        self,
        model: str = "okay_nabu",
        cutoff: float | None = None,
        speech_db: float = VadConfig.threshold_db,
    ) -> None:
        try:
            self._model = MicroWakeWord.from_builtin(Model(model))
        except ValueError as exc:
            raise ModelError(f"wake word {model!r}: not one of {', '.join(WAKE_MODELS)}") from exc
        self._features = MicroWakeWordFeatures()
        self.name = model
        self.phrase: str = self._model.wake_word
        self.own_cutoff: float = self._model.probability_cutoff  # the model's author's
        self.cutoff = TUNED_CUTOFFS.get(model, self.own_cutoff) if cutoff is None else cutoff
        self.quiet_db = speech_db - QUIET_MARGIN_DB  # the endpointer's speech, less a margin
        self.detections = 0
        self.held_back = 0  # quiet blocks never run through the model
        self._quiet_s = 0.0  # of quiet since the last louder block
        self._held = bytearray()  # the latest held-back quiet

    def feed(self, pcm: bytes) -> float | None:
        """16 kHz 16-bit mono audio in; the probability when the wake word was just heard."""
        if frame_level_db(pcm) >= self.quiet_db:
            self._quiet_s = 0.0
        elif self._quiet_s >= QUIET_HANGOVER_S:
            self.held_back += 1
            self._held += pcm
            del self._held[:-_PRE_ROLL_BYTES]
            return None
        else:
            self._quiet_s += len(pcm) / _BYTES_PER_S
        if self._held:
            pcm = bytes(self._held) + pcm
            self._held.clear()
        return self._infer(pcm)

    def _infer(self, pcm: bytes) -> float | None:
        best = 0.0
        for features in self._features.process_streaming(pcm):
            best = max(best, self._model.process_streaming_prob(features) or 0.0)
        if best <= self.cutoff:
            return None
        self.detections += 1
        self.reset()
        return best

    def reset(self) -> None:
        """Forget the audio heard so far (after a detection, or when the board spoke)."""
        self._model.reset()
        self._features.reset()
        self._quiet_s = 0.0
        self._held.clear()


def chime(sample_rate: int, level: float = 0.15) -> np.ndarray:
    """The wake acknowledgement: two rising 60 ms tones, faded in and out, as int16."""
    tones = []
    for hz in (880.0, 1320.0):
        t = np.arange(int(sample_rate * 0.06)) / sample_rate
        fade = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.01)
        tones.append(np.sin(2 * np.pi * hz * t) * fade * level)
    return (np.concatenate(tones) * 32767).astype(np.int16)
