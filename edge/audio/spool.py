"""Spool directories as microphone and speaker: file-driven audio for boards with no sound card.

A test harness drives an emulated board through two folders:

- **input** (:class:`SpoolSource`): a live microphone that hears silence until a
  ``*.wav`` file appears in the folder; the file is then heard in real time,
  frame by frame, and moved to ``done/``. Files are taken in name order.
  Writers must write ``NAME.tmp`` and rename it to ``NAME.wav`` (a rename is
  atomic; a file written in place could be read half-written); hidden files
  (``.NAME.wav``) are never read. Only 16-bit
  mono WAV is accepted (any rate, resampled to the capture rate); anything else
  is counted, logged, and moved to ``rejected/`` beside a ``NAME.wav.error``
  that says why; the edge keeps listening.
- **output** (:class:`SpoolSink`): every playback becomes one WAV file,
  ``NNNNNN-LABEL.wav`` (a sequence number that keeps counting across restarts,
  and the speak request's ``binding_id``, or ``notice`` for the local notice),
  with ``NNNNNN-LABEL.json`` beside it (text, samples, rate, interrupted). Both
  are written under a hidden ``.tmp`` name and renamed, the JSON first, so a
  ``*.wav`` that exists is complete and described. Playback is paced in real
  time, as a speaker would be, so the echo gate and barge-in behave as on a
  real board.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import wave
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path

from edge.audio.base import SAMPLE_WIDTH, AudioFrame, Pcm, PlaybackResult, PlaybackTag, playback_tag
from edge.audio.wavfile import WavSink, read_wav_mono16
from edge.errors import AudioError, PlaybackError
from shared.lifecycle import Service

log = logging.getLogger(__name__)

DONE = "done"
REJECTED = "rejected"
READY_SUFFIX = ".wav"
_LABEL_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_SEQUENCED = re.compile(r"^(\d{6,})-.*\.wav$")


def _spool_dirs(folder: Path, *subfolders: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in subfolders:
            (folder / name).mkdir(exist_ok=True)
    except OSError as exc:
        raise AudioError(f"spool folder {folder}: cannot create it: {exc}") from exc


def read_spooled_wav(path: Path, sample_rate: int) -> Pcm:
    """A spooled file as int16 at ``sample_rate``; AudioError unless it is 16-bit mono WAV."""
    try:
        with wave.open(str(path), "rb") as wav:
            channels, width = wav.getnchannels(), wav.getsampwidth()
    except (OSError, EOFError, wave.Error) as exc:
        raise AudioError(f"{path.name}: not a readable WAV file: {exc}") from exc
    if width != SAMPLE_WIDTH or channels != 1:
        raise AudioError(
            f"{path.name}: expected 16-bit mono PCM, got {8 * width}-bit, {channels} channel(s)"
        )
    return read_wav_mono16(path, sample_rate)


@dataclass
class SpoolStats:
    """What the input spool has done since start."""

    played: int = 0
    rejected: int = 0
    last_rejection: str | None = None


class SpoolSource(Service):
    """A microphone fed from a folder: silence, or the next ``*.wav`` by name, in real time."""

    def __init__(self, folder: Path, *, sample_rate: int = 16000, block_ms: int = 100) -> None:
        self.folder = folder
        self.sample_rate = sample_rate
        self.block = max(1, sample_rate * block_ms // 1000)
        self.stats = SpoolStats()
        self.current: str | None = None
        self._closed = False

    async def start(self) -> None:
        """Make the spool's folders."""
        await asyncio.to_thread(_spool_dirs, self.folder, DONE, REJECTED)

    async def close(self) -> None:
        """Stop handing out frames."""
        self._closed = True

    def _next_file(self) -> Path | None:
        try:
            names = sorted(
                entry.name
                for entry in os.scandir(self.folder)
                if entry.name.endswith(READY_SUFFIX)
                and not entry.name.startswith(".")  # a writer's hidden temporary file
                and entry.is_file()
            )
        except OSError as exc:
            raise AudioError(f"spool folder {self.folder}: cannot list it: {exc}") from exc
        return self.folder / names[0] if names else None

    def _take(self) -> tuple[Path, Pcm] | None:
        """The next file's audio (rejecting any that are not 16-bit mono WAV), or None."""
        while (path := self._next_file()) is not None:
            try:
                return path, read_spooled_wav(path, self.sample_rate)
            except AudioError as exc:
                if not path.exists():
                    continue  # taken away by its writer between the listing and the read
                self._reject(path, str(exc))
        return None

    def _reject(self, path: Path, reason: str) -> None:
        self.stats.rejected += 1
        self.stats.last_rejection = reason
        log.error("spool: rejected %s (%d so far): %s", path.name, self.stats.rejected, reason)
        target = self.folder / REJECTED / path.name
        try:
            os.replace(path, target)
            target.with_name(target.name + ".error").write_text(reason + "\n")
        except OSError as exc:
            # It cannot be moved: remove it, or it would be rejected again every frame.
            log.error("spool: cannot move %s to %s: %s; deleting it", path.name, REJECTED, exc)
            path.unlink(missing_ok=True)

    def _finish(self, path: Path) -> None:
        self.stats.played += 1
        log.info("spool: heard %s (%d so far)", path.name, self.stats.played)
        try:
            os.replace(path, self.folder / DONE / path.name)
        except OSError as exc:
            log.error("spool: cannot move %s to %s: %s; deleting it", path.name, DONE, exc)
            path.unlink(missing_ok=True)

    async def frames(self) -> AsyncIterator[AudioFrame]:
        """Frames forever, one block per block time: silence, or the spooled files in turn."""
        silence = bytes(self.block * SAMPLE_WIDTH)
        block_s = self.block / self.sample_rate
        start = time.monotonic()
        index = 0
        playing: tuple[Path, Pcm] | None = None
        offset = 0
        while not self._closed:
            due = start + index * block_s
            # A frame exists once its last sample has been "heard".
            await asyncio.sleep(max(0.0, due + block_s - time.monotonic()))
            if self._closed:
                return
            if playing is None:
                playing = await asyncio.to_thread(self._take)
                offset = 0
                self.current = playing[0].name if playing else None
            if playing is None:
                pcm = silence
            else:
                path, audio = playing
                piece = audio[offset : offset + self.block]
                offset += self.block
                pcm = piece.tobytes().ljust(len(silence), b"\0")
                if offset >= len(audio):
                    await asyncio.to_thread(self._finish, path)
                    playing, self.current = None, None
            yield AudioFrame(pcm, self.sample_rate, due)
            index += 1


def _label(tag: PlaybackTag | None) -> str:
    raw = tag.label if tag is not None else "speech"
    return _LABEL_CHARS.sub("_", raw).strip("._")[:80] or "speech"


def next_sequence(folder: Path) -> int:
    """One more than the highest ``NNNNNN-`` sequence already in ``folder`` (1 when none)."""
    numbers = [int(m.group(1)) for p in folder.iterdir() if (m := _SEQUENCED.match(p.name))]
    return max(numbers, default=0) + 1


@dataclass(frozen=True)
class SpooledPlayback:
    """The description written beside each output WAV."""

    sequence: int
    label: str
    text: str
    sample_rate: int
    samples: int
    duration_s: float
    interrupted: bool
    wav: str


class SpoolSink(Service):
    """A speaker that writes each playback to its own WAV file in a folder, in real time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.written: list[SpooledPlayback] = []
        self._sequence = 1

    async def start(self) -> None:
        """Make the spool folder, drop half-written files and find the next sequence number."""
        await asyncio.to_thread(_spool_dirs, self.folder)
        for stale in self.folder.glob(".*.tmp"):
            stale.unlink(missing_ok=True)  # a playback cut off by a crash
        self._sequence = await asyncio.to_thread(next_sequence, self.folder)

    async def play(
        self, chunks: AsyncIterator[Pcm], sample_rate: int, stop: asyncio.Event
    ) -> PlaybackResult:
        """Play in real time into a hidden file; rename it to ``NNNNNN-LABEL.wav`` when done."""
        tag = playback_tag.get()
        sequence, self._sequence = self._sequence, self._sequence + 1
        name = f"{sequence:06d}-{_label(tag)}"
        wav_path, json_path = self.folder / f"{name}.wav", self.folder / f"{name}.json"
        tmp_wav = self.folder / f".{name}.wav.tmp"
        try:
            async with WavSink(tmp_wav, realtime=True) as sink:
                result = await sink.play(chunks, sample_rate, stop)
            record = SpooledPlayback(
                sequence=sequence,
                label=_label(tag),
                text=tag.text if tag is not None else "",
                sample_rate=sample_rate,
                samples=result.samples_played,
                duration_s=round(result.duration_s, 3),
                interrupted=result.interrupted,
                wav=wav_path.name,
            )
            tmp_json = self.folder / f".{name}.json.tmp"
            tmp_json.write_text(json.dumps(asdict(record), ensure_ascii=False, indent=2) + "\n")
            os.replace(tmp_json, json_path)
            os.replace(tmp_wav, wav_path)
        except OSError as exc:
            raise PlaybackError(f"spool folder {self.folder}: cannot write {name}: {exc}") from exc
        finally:
            tmp_wav.unlink(missing_ok=True)
        self.written.append(record)
        return result
