"""Speech synthesis with Piper, and the speaker node: speak requests in, audio out, acks back.

The voice is loaded once. Synthesis runs sentence by sentence on one worker
thread and playback starts with the first sentence, so the time to first audio
is one sentence's synthesis, not the whole reply's. Requests play strictly in
arrival order: an answer home sends in parts (its first sentence while the model
still writes the rest) plays part after part, the microphone shut from the first
part's start to the last queued part's end. A barge-in cuts the answer it
interrupts: later parts of the same turn are acked ``interrupted``, never
played. Every request with a ``binding_id`` is acked on
``events.action.speech.completed.<binding_id>`` after playback: ``ok: true``;
``interrupted: true`` when a barge-in cut it off (or dropped it from the queue);
``ok: false`` with ``error`` when synthesis or the sink failed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import onnxruntime
from piper import PiperVoice, SynthesisConfig

from edge.audio.base import AudioSink, Pcm, PlaybackResult, PlaybackTag, tagged
from edge.bus import Bus
from edge.echo_gate import EchoGate
from edge.errors import EdgeError, ModelError, SynthesisFailed
from edge.models import PiperVoiceFiles
from edge.wire import SpeakRequest
from shared.errors import ContractError
from shared.event import Event
from shared.lifecycle import Service, cancel_and_wait
from shared.messages.trace import FIRST_AUDIO, SPEAK_RECEIVED, TTS_FIRST_CHUNK, Marks
from shared.messages.voice import SpeechCompleted
from shared.subjects import speak_pattern

log = logging.getLogger(__name__)

# Turns a barge-in cut off, remembered so their later parts are not played.
_CUT_TURNS_KEPT = 32


class PiperSynthesizer:
    """One Piper voice, loaded once; blocking synthesis, sentence by sentence."""

    def __init__(
        self,
        voice: PiperVoiceFiles,
        *,
        length_scale: float | None = None,
        first_clause_words: int = 0,
        noise_w_scale: float | None = None,
        threads: int = 0,
    ) -> None:
        try:
            self.voice = PiperVoice.load(voice.model, config_path=voice.config)
            if threads > 0:
                # Piper builds its session with onnxruntime's own thread count (every core);
                # on a machine it shares with the model server, fewer threads fight less.
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                self.voice.session = onnxruntime.InferenceSession(
                    str(voice.model), sess_options=options, providers=["CPUExecutionProvider"]
                )
        except Exception as exc:  # onnxruntime and json raise many kinds; name the file
            raise ModelError(f"{voice.model}: Piper could not load the voice: {exc}") from exc
        self.sample_rate: int = self.voice.config.sample_rate
        # noise_w_scale None keeps the voice's own: its phoneme durations vary from one
        # synthesis to the next; 0 makes them repeatable (tests compare lengths).
        self._config = SynthesisConfig(length_scale=length_scale, noise_w_scale=noise_w_scale)
        self.first_clause_words = first_clause_words

    def sentences(self, text: str) -> Iterator[Pcm]:
        """Int16 audio, one chunk per sentence (a long first one's first clause apart)."""
        for part in split_first_clause(text, self.first_clause_words):
            for chunk in self.voice.synthesize(part, syn_config=self._config):
                yield np.asarray(chunk.audio_int16_array, dtype=np.int16).reshape(-1)

    def render(self, text: str) -> Pcm:
        """The whole text as one int16 array (for notices synthesized once at start)."""
        parts = list(self.sentences(text))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)


_SENTENCE_END = re.compile(r"[.!?](\s|$)")
_CLAUSE_END = re.compile(r"[,;:](\s)")


def split_first_clause(text: str, min_words: int) -> list[str]:
    """``text`` with its first sentence's first clause apart, when both sides of the cut
    have at least ``min_words`` words; else ``[text]`` (``min_words`` 0: never cut).

    The time to first audio is the first chunk's synthesis: a clause, not a sentence.
    """
    if min_words <= 0:
        return [text]
    end = _SENTENCE_END.search(text)
    sentence_end = end.end() if end else len(text)
    for clause in _CLAUSE_END.finditer(text, 0, sentence_end):
        head, tail = text[: clause.end()].strip(), text[clause.end() :].strip()
        if len(head.split()) < min_words:
            continue
        if len(text[clause.end() : sentence_end].split()) >= min_words:
            return [head, tail]
        break
    return [text]


@dataclass
class _Item:
    text: str
    request: SpeakRequest | None  # None: a local notice, nobody waits for an ack
    pcm: Pcm | None = None  # already rendered (notices)
    received_at: float = field(default_factory=time.monotonic)
    dropped: bool = False  # a barge-in came while it waited: acked, never played
    tail: bool = True  # the echo gate's tail follows it (not after the wake chime)
    first_chunk_at: float | None = None  # monotonic: the first sentence was synthesized
    first_audio_at: float | None = None  # monotonic: it reached the sound device

    def marks(self) -> Marks:
        """This item's marks for the ack's trace (docs/architecture.md "One voice turn")."""
        at = {SPEAK_RECEIVED: self.received_at}
        if self.first_chunk_at is not None:
            at[TTS_FIRST_CHUNK] = self.first_chunk_at
        if self.first_audio_at is not None:
            at[FIRST_AUDIO] = self.first_audio_at
        return Marks(at=at)


def _label(item: _Item) -> str:
    """How a sink that names its output calls this playback: the binding id, or notice."""
    if item.request is None:
        return "notice"
    return item.request.binding_id or "speech"


@dataclass
class SpeakerStats:
    """Counters and the last timings, for logs and benchmarks."""

    spoken: int = 0
    failed: int = 0
    interrupted: int = 0
    malformed: int = 0
    unackable: int = 0
    notices: int = 0
    last_time_to_first_audio_s: float | None = None
    last_playback: PlaybackResult | None = None


class Speaker(Service):
    """The TTS node: subscribes to the device's speak subject and plays in order."""

    def __init__(
        self,
        bus: Bus,
        synth: PiperSynthesizer,
        sink: AudioSink,
        gate: EchoGate,
        *,
        device: str,
        on_settled: Callable[[str], None] | None = None,
    ) -> None:
        self.bus = bus
        self.synth = synth
        self.sink = sink
        self.gate = gate
        self.device = device
        self.source = f"edge.audio.{device}"
        self.stats = SpeakerStats()
        self.acks: list[SpeechCompleted] = []
        self._on_settled = on_settled
        # Told when an answer's last part has played (its text, when the microphone
        # reopens): mode wake listens for a follow-up then.
        self.on_answered: Callable[[str, float], None] | None = None
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._pending: list[_Item] = []  # queued, not yet taken by the worker
        self._current: _Item | None = None  # taken by the worker: synthesizing or playing
        self._cut: deque[str] = deque(maxlen=_CUT_TURNS_KEPT)
        self._stop = asyncio.Event()
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="piper")
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Subscribe to the speak rail and start the playback task."""
        await self.bus.subscribe(speak_pattern(self.device), self._on_speak)
        self._task = asyncio.create_task(self._run(), name="speaker")

    async def close(self) -> None:
        """Stop the playback task and the synthesis thread."""
        self._stop.set()
        task, self._task = self._task, None
        await cancel_and_wait(task, reraise=False)
        self._executor.shutdown(wait=True, cancel_futures=True)

    @property
    def speaking(self) -> bool:
        """True while an item is being synthesized or played."""
        return self._busy

    async def wait_idle(self) -> None:
        """Return once the queue is empty and nothing is playing."""
        await self._idle.wait()

    async def _on_speak(self, subject: str, event: Event) -> None:
        try:
            request = SpeakRequest.from_event(subject, event)
        except ContractError as exc:
            self.stats.malformed += 1
            log.warning("refused a speak event %s on %s: %s", event.event_id, subject, exc)
            if event.binding_id is not None:
                await self._ack(event.binding_id, ok=False, error=f"refused: {exc}")
            return
        self.say(request)

    def say(self, request: SpeakRequest) -> None:
        """Queue a speak request behind everything already queued (dropped if its turn was cut)."""
        item = _Item(request.text, request)
        item.dropped = request.binding_id is not None and request.binding_id in self._cut
        self._enqueue(item)

    def say_local(self, pcm: Pcm, text: str, *, tail: bool = True) -> None:
        """Queue already-rendered audio that nobody acks (a notice, the wake chime).

        ``tail`` False reopens the microphone as soon as it has played (the chime: the
        person is about to speak).
        """
        self._enqueue(_Item(text, None, pcm, tail=tail))

    def _enqueue(self, item: _Item) -> None:
        self._idle.clear()
        self._pending.append(item)
        self._queue.put_nowait(item)

    def barge_in(self) -> None:
        """Stop what is playing and drop what is queued; each is acked ``interrupted``."""
        if self._busy:
            self._stop.set()
        for item in self._pending:
            item.dropped = True
        taken = [] if self._current is None else [self._current]
        for cut in taken + self._pending:
            turn = None if cut.request is None else cut.request.binding_id
            if turn is not None and turn not in self._cut:
                self._cut.append(turn)

    def _continues(self, item: _Item) -> bool:
        """Whether the next queued item is the next part of ``item``'s answer."""
        if item.request is None or item.request.binding_id is None or not self._pending:
            return False
        after = self._pending[0]
        return after.request is not None and after.request.binding_id == item.request.binding_id

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            self._pending.remove(item)
            self._current = item
            self._busy = True
            try:
                if item.dropped:
                    await self._settle(item, interrupted=True)
                else:
                    await self._speak(item)
            except Exception:
                # One bad item (a failed ack publish, say) must not silence the board.
                self.stats.failed += 1
                log.exception("speaker failed on %r", item.text[:60])
            finally:
                self._busy = False
                self._current = None
                if self._queue.empty():
                    self._idle.set()

    async def _speak(self, item: _Item) -> None:
        self._stop.clear()
        chunks = self._prerendered(item.pcm) if item.pcm is not None else self._stream(item)
        self.gate.speaking_started()
        result: PlaybackResult | None = None
        try:
            with tagged(PlaybackTag(_label(item), item.text)):
                result = await self.sink.play(chunks, self.synth.sample_rate, self._stop)
        except (EdgeError, OSError) as exc:
            self.stats.failed += 1
            log.error("speech failed (%r): %s", item.text[:60], exc)
            await self._settle(item, error=str(exc))
            return
        finally:
            # Whatever happened, the microphone must open again, once the answer's last
            # queued part has played (a barge-in ends it at once).
            interrupted = result is not None and result.interrupted
            if interrupted or result is None or not self._continues(item):
                self.gate.speaking_ended(barge_in=interrupted or not item.tail)
                if result is not None and not interrupted and item.request is not None:
                    self._answered(item.text)
            await chunks.aclose()
        self.stats.last_playback = result
        item.first_audio_at = result.first_audio_at
        if result.first_audio_at is not None:
            self.stats.last_time_to_first_audio_s = result.first_audio_at - item.received_at
        await self._settle(item, interrupted=result.interrupted, duration_s=result.duration_s)

    def _answered(self, text: str) -> None:
        if self.on_answered is not None:
            self.on_answered(text, time.monotonic() + self.gate.tail_s)

    async def _settle(
        self,
        item: _Item,
        *,
        interrupted: bool = False,
        error: str | None = None,
        duration_s: float = 0.0,
    ) -> None:
        if interrupted:
            self.stats.interrupted += 1
        elif error is None:
            self.stats.spoken += 1
        if item.request is None:
            self.stats.notices += 1
            return
        binding_id = item.request.binding_id
        if binding_id is None:
            self.stats.unackable += 1
            log.warning("spoke %r with no binding_id: nobody can be acked", item.text[:60])
            return
        await self._ack(
            binding_id,
            ok=error is None,
            interrupted=interrupted,
            error=error,
            duration_s=duration_s,
            trace=item.marks(),
        )
        if self._on_settled is not None:
            self._on_settled(binding_id)

    async def _ack(
        self,
        binding_id: str,
        *,
        ok: bool,
        interrupted: bool = False,
        error: str | None = None,
        duration_s: float = 0.0,
        trace: Marks | None = None,
    ) -> None:
        ack = SpeechCompleted(binding_id, self.device, ok, interrupted, error, duration_s, trace)
        self.acks.append(ack)
        event = ack.to_event(
            source=self.source, sequence_number=self.bus.next_sequence(self.source)
        )
        await self.bus.hand_over(ack.subject, event)

    async def _prerendered(self, pcm: Pcm) -> AsyncGenerator[Pcm, None]:
        yield pcm

    async def _stream(self, item: _Item) -> AsyncGenerator[Pcm, None]:
        """Sentences from the synthesis thread as they are ready; stops it when closed early."""
        text = item.text
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Pcm | BaseException | None] = asyncio.Queue()
        cancelled = threading.Event()

        def produce() -> None:
            try:
                for pcm in self.synth.sentences(text):
                    if cancelled.is_set():
                        break
                    if item.first_chunk_at is None:
                        item.first_chunk_at = time.monotonic()
                    loop.call_soon_threadsafe(queue.put_nowait, pcm)
                loop.call_soon_threadsafe(queue.put_nowait, None)
            # Reported to the consumer, which acks the failure.
            except Exception as exc:  # noqa: BLE001
                loop.call_soon_threadsafe(queue.put_nowait, exc)

        future = loop.run_in_executor(self._executor, produce)
        try:
            while (chunk := await queue.get()) is not None:
                if isinstance(chunk, BaseException):
                    raise SynthesisFailed(f"Piper failed on {text[:60]!r}: {chunk}") from chunk
                yield chunk
        finally:
            cancelled.set()
            await asyncio.shield(future)
