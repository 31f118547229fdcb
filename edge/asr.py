"""Streaming speech recognition with Vosk, and the node that turns utterances into turns.

The model is loaded once; one recognizer is created once and reset between
utterances (creating one costs about a second with a full model). Vosk calls
block, so they run on one dedicated worker thread, which also keeps the
recognizer single-threaded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import vosk

from edge.bus import Bus
from edge.endpoint.segmenter import SegmentEvent, UtteranceAudio, UtteranceEnd, UtteranceStart
from edge.errors import ModelError
from shared.event import new_binding_id
from shared.lifecycle import Service, cancel_and_wait
from shared.messages.trace import ASR_FINAL, ENDPOINT, VOICE_END, Marks
from shared.messages.voice import Heard, Partial, Turn, WordTiming

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recognition:
    """What the recognizer heard in one utterance."""

    text: str
    confidence: float
    words: tuple[WordTiming, ...]


class VoskRecognizer:
    """One Vosk model and one reusable recognizer; blocking calls, one thread at a time."""

    def __init__(
        self, model_dir: Path, *, sample_rate: int = 16000, grammar: tuple[str, ...] | None = None
    ) -> None:
        vosk.SetLogLevel(-1)
        try:
            self.model = vosk.Model(str(model_dir))
        except Exception as exc:  # vosk raises a bare Exception when a model fails to load
            raise ModelError(f"{model_dir}: Vosk could not load the model: {exc}") from exc
        self.sample_rate = sample_rate
        self.grammar = grammar
        if grammar is None:
            self._rec = vosk.KaldiRecognizer(self.model, sample_rate)
        else:
            self._rec = vosk.KaldiRecognizer(
                self.model, sample_rate, json.dumps(list(grammar), ensure_ascii=False)
            )
        self._rec.SetWords(True)
        self._segments: list[dict[str, Any]] = []
        self._last_partial = ""

    def accept(self, pcm: bytes) -> str | None:
        """Feed 16-bit PCM; return the partial transcript when it changed, else None."""
        if self._rec.AcceptWaveform(pcm):
            # Vosk found a pause on its own: keep the segment, the utterance goes on.
            self._segments.append(json.loads(self._rec.Result()))
            partial = ""
        else:
            partial = json.loads(self._rec.PartialResult()).get("partial", "")
        text = " ".join([*(s.get("text", "") for s in self._segments), partial]).strip()
        if text and text != self._last_partial:
            self._last_partial = text
            return text
        return None

    @property
    def heard_words(self) -> bool:
        """True once the utterance's transcript so far has any words."""
        return bool(self._last_partial)

    def finish(self) -> Recognition:
        """Close the utterance: the whole transcript; the recognizer is ready for the next."""
        self._segments.append(json.loads(self._rec.FinalResult()))
        segments, self._segments, self._last_partial = self._segments, [], ""
        self._rec.Reset()
        words = tuple(
            WordTiming(
                word=str(w["word"]),
                start_s=float(w["start"]),
                end_s=float(w["end"]),
                confidence=float(w.get("conf", 1.0)),
            )
            for s in segments
            for w in s.get("result", [])
        )
        text = " ".join(s.get("text", "") for s in segments if s.get("text")).strip()
        confidence = sum(w.confidence for w in words) / len(words) if words else 0.0
        return Recognition(text, confidence, words)

    def reset(self) -> None:
        """Drop anything fed since the last utterance."""
        self._rec.Reset()
        self._segments, self._last_partial = [], ""


def _wall(at: float) -> datetime:
    """Monotonic ``at`` as a UTC wall-clock instant."""
    return datetime.now(UTC) - timedelta(seconds=time.monotonic() - at)


@dataclass
class AsrStats:
    """Counters and the last latency, for logs and benchmarks."""

    turns: int = 0
    empty: int = 0
    partials: int = 0
    audio_s: float = 0.0
    decode_s: float = 0.0
    # Per turn: (end of speech -> turn published, endpoint decision -> turn published), seconds.
    latencies: list[tuple[float, float]] = field(default_factory=list)


class AsrNode(Service):
    """Consumes segment events; publishes partials and turns for one device."""

    def __init__(
        self, bus: Bus, recognizer: VoskRecognizer, *, device: str, partials: bool = True
    ) -> None:
        self.bus = bus
        self.recognizer = recognizer
        self.device = device
        self.partials = partials
        self.source = f"edge.audio.{device}"
        self.stats = AsrStats()
        self.queue: asyncio.Queue[SegmentEvent] = asyncio.Queue()
        self.turn_published: list[Turn] = []
        # Told after each decoded frame (audio decoded until, transcript changed, has words,
        # now); the endpointer answers with the utterance's end once the words settled.
        self.on_decoded: Callable[[float, bool, bool, float], list[SegmentEvent]] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="vosk")
        self._task: asyncio.Task[None] | None = None
        self._binding_id: str | None = None
        self._started_at = 0.0
        self._wake_probability: float | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    async def start(self) -> None:
        """Start the recognition task."""
        self._task = asyncio.create_task(self._run(), name="asr")

    async def close(self) -> None:
        """Stop the recognition task and its thread; the queue is dropped."""
        task, self._task = self._task, None
        await cancel_and_wait(task, reraise=False)
        self._executor.shutdown(wait=True)

    def feed(self, events: list[SegmentEvent]) -> None:
        """Queue segment events from the endpointer (never blocks the capture loop)."""
        for event in events:
            self._idle.clear()
            self.queue.put_nowait(event)

    async def wait_idle(self) -> None:
        """Return once every queued segment event has been handled."""
        await self._idle.wait()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            event = await self.queue.get()
            try:
                await self._handle(loop, event)
            except Exception:
                log.exception("ASR failed on %s; the utterance is dropped", type(event).__name__)
                self._binding_id = None
                await loop.run_in_executor(self._executor, self.recognizer.reset)
            if self.queue.empty():
                self._idle.set()

    async def _handle(self, loop: asyncio.AbstractEventLoop, event: SegmentEvent) -> None:
        if isinstance(event, UtteranceStart):
            self._binding_id, self._started_at = new_binding_id(), event.at
            self._wake_probability = event.wake_probability
            await loop.run_in_executor(self._executor, self.recognizer.reset)
        elif isinstance(event, UtteranceAudio):
            binding_id = self._binding_id
            if binding_id is None:
                return
            began = time.perf_counter()
            partial = await loop.run_in_executor(
                self._executor, self.recognizer.accept, event.frame.pcm
            )
            self.stats.decode_s += time.perf_counter() - began
            self.stats.audio_s += event.frame.duration_s
            if self.on_decoded is not None:
                self.feed(
                    self.on_decoded(
                        event.frame.ends_at,
                        partial is not None,
                        self.recognizer.heard_words,
                        time.monotonic(),
                    )
                )
            if partial is not None and self.partials:
                await self._publish_partial(binding_id, partial)
        elif self._binding_id is not None:
            await self._finish(loop, event)

    async def _publish_partial(self, binding_id: str, text: str) -> None:
        partial = Partial(self.device, binding_id, text)
        self.stats.partials += 1
        event = partial.to_event(source=self.source, sequence_number=self._next())
        await self.bus.publish(partial.subject, event)

    async def _finish(self, loop: asyncio.AbstractEventLoop, end: UtteranceEnd) -> None:
        binding_id, self._binding_id = self._binding_id, None
        began = time.perf_counter()
        result = await loop.run_in_executor(self._executor, self.recognizer.finish)
        final_at = time.monotonic()
        self.stats.decode_s += time.perf_counter() - began
        if not result.text or binding_id is None:
            self.stats.empty += 1
            log.info("utterance (%s) had no words; no turn published", end.reason)
            return
        turn = Turn(
            device=self.device,
            binding_id=binding_id,
            text=result.text,
            confidence=result.confidence,
            words=result.words,
            started_at=_wall(self._started_at),
            ended_at=_wall(end.speech_ended_at),
            endpoint=end.reason,
            trace=Marks(at={VOICE_END: end.speech_ended_at, ENDPOINT: end.at, ASR_FINAL: final_at}),
            heard=Heard(end.level_db, self._wake_probability),
        )
        await self.bus.hand_over(
            turn.subject, turn.to_event(source=self.source, sequence_number=self._next())
        )
        now = time.monotonic()
        self.stats.turns += 1
        self.stats.latencies.append((now - end.speech_ended_at, now - end.at))
        self.turn_published.append(turn)
        log.info("turn %s: %r (confidence %.2f)", binding_id, turn.text, turn.confidence)

    def _next(self) -> int:
        return self.bus.next_sequence(self.source)
