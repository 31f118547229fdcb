"""``edge run``: the component list, started in order and stopped in reverse.

    1. nats      the loopback nats-server of the board
    2. bus       the edge's NATS client
    3. speaker   TTS node: subscribes to the device's speak subject, plays, acks
    4. notice    the unreachable-home notice (synthesized once) and bridge status
       replies   the reply rail (text not to be spoken) into the log
    5. asr       Vosk node: segment events in, partials and turns out
    6. bridge    the edge bridge node (:mod:`edge.bridge_plugin`), only with ``bridge.half``
    7. capture   microphone -> echo gate -> (wake word) -> endpointer -> asr; push-to-talk
    8. systemd   READY=1, then watchdog pings (no-op outside systemd)

Everything that listens is up before the bridge opens, and the bridge is up
before the microphone, so nothing is said into a board that cannot yet carry it.
Models load once, in parallel threads, before any component starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from edge.asr import AsrNode, VoskRecognizer
from edge.audio import (
    SoundDeviceSink,
    SoundDeviceSource,
    SpoolSink,
    SpoolSource,
    WavSink,
    WavSource,
)
from edge.audio.base import AudioSink, AudioSource
from edge.bridge_plugin import EdgeBridgeFactory, check_bridge_files, open_edge_bridge
from edge.bus import Bus
from edge.capture import CaptureNode
from edge.config import (
    AudioConfig,
    DeviceInput,
    DeviceOutput,
    EdgeConfig,
    EndpointingConfig,
    PushToTalkConfig,
    SpoolInput,
    SpoolOutput,
    WavInput,
    WavOutput,
)
from edge.echo_gate import EchoGate
from edge.endpoint.buttons import Button, GpioValueButton, TerminalKeyButton
from edge.endpoint.segmenter import Endpointer
from edge.models import resolve_piper_voice, resolve_vosk_model
from edge.natsd import LocalNatsServer
from edge.notice import NoticeNode
from edge.replies import ReplyLog
from edge.systemd import SystemdNotifier
from edge.tts import PiperSynthesizer, Speaker
from edge.wake import WakeWord
from shared.lifecycle import Service

log = logging.getLogger(__name__)

ASR_SAMPLE_RATE = 16000


@dataclass(frozen=True)
class Models:
    """The loaded speech models, shared by every run in one process (loaded once)."""

    recognizer: VoskRecognizer
    synth: PiperSynthesizer

    @classmethod
    async def load(cls, config: EdgeConfig) -> Models:
        """Load the Vosk model and the Piper voice in parallel threads."""
        model_dir = resolve_vosk_model(config.asr.model)
        voice = resolve_piper_voice(config.tts.voice)
        recognizer, synth = await asyncio.gather(
            asyncio.to_thread(
                VoskRecognizer, model_dir, sample_rate=ASR_SAMPLE_RATE, grammar=config.asr.grammar
            ),
            asyncio.to_thread(
                PiperSynthesizer,
                voice,
                length_scale=config.tts.length_scale,
                first_clause_words=config.tts.first_clause_words,
                threads=config.tts.threads,
            ),
        )
        return cls(recognizer, synth)


def with_audio_files(
    config: EdgeConfig, audio_in: Path | None, audio_out: Path | None
) -> EdgeConfig:
    """``config`` with ``--audio-in`` / ``--audio-out`` files in place of its devices."""
    audio = config.audio
    if audio_in is not None:
        audio = replace(audio, input=WavInput(audio_in, realtime=True))
    if audio_out is not None:
        audio = replace(audio, output=WavOutput(audio_out, realtime=True))
    return replace(config, audio=audio)


def open_source(audio: AudioConfig) -> AudioSource:
    """The configured microphone (or file, or spool folder)."""
    match audio.input:
        case WavInput(path=path, realtime=realtime):
            return WavSource(
                path, sample_rate=ASR_SAMPLE_RATE, block_ms=audio.block_ms, realtime=realtime
            )
        case DeviceInput(device=device):
            return SoundDeviceSource(device, sample_rate=ASR_SAMPLE_RATE, block_ms=audio.block_ms)
        case SpoolInput(dir=folder):
            return SpoolSource(folder, sample_rate=ASR_SAMPLE_RATE, block_ms=audio.block_ms)
    raise TypeError(f"unknown audio input {audio.input!r}")


def open_sink(audio: AudioConfig) -> AudioSink:
    """The configured speaker (or file, or spool folder)."""
    match audio.output:
        case WavOutput(path=path, realtime=realtime):
            return WavSink(path, realtime=realtime)
        case DeviceOutput(device=device):
            return SoundDeviceSink(device)
        case SpoolOutput(dir=folder):
            return SpoolSink(folder)
    raise TypeError(f"unknown audio output {audio.output!r}")


def open_button(ptt: PushToTalkConfig) -> Button | None:
    """The configured push-to-talk source, if any."""
    if ptt.source == "gpio" and ptt.value_path is not None:
        return GpioValueButton(ptt.value_path, active_low=ptt.active_low, poll_ms=ptt.poll_ms)
    if ptt.source == "key":
        return TerminalKeyButton(ptt.key)
    return None


@dataclass
class RunSummary:
    """What one run did, for ``--json`` and the exit code."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    notices: int = 0
    not_taken: int = 0  # events for home the bridge half did not take (edge/handover.py)
    barge_ins: int = 0
    wakes: int = 0  # wake words heard (mode wake)
    follow_ups: int = 0  # answers after which the board listened without the wake word
    echo_gate_dropped: int = 0
    malformed_events: int = 0


def wake_word(endpointing: EndpointingConfig) -> WakeWord | None:
    """Mode wake's model, asleep under the endpointer's speech threshold less a margin."""
    if endpointing.mode != "wake":
        return None
    wake = endpointing.wake
    return WakeWord(wake.model, wake.cutoff, endpointing.vad.threshold_db)


class EdgeRuntime(Service):
    """The running edge: enter to start every component, exit to stop them in reverse."""

    def __init__(
        self,
        config: EdgeConfig,
        *,
        models: Models | None = None,
        source: AudioSource | None = None,
        sink: AudioSink | None = None,
        button: Button | None = None,
        bridge_factory: EdgeBridgeFactory | None = None,
        notifier: SystemdNotifier | None = None,
    ) -> None:
        self.config = config
        self.models = models
        self._source = source
        self._sink = sink
        self._button = button
        self._bridge_factory = bridge_factory
        self.notifier = notifier or SystemdNotifier()
        self.gate = EchoGate(config.echo_gate.tail_ms / 1000)
        self._settled: set[str] = set()
        self._settled_changed = asyncio.Event()
        self.home = "not heard from yet"  # what the bridge last said about home
        self._stack = AsyncExitStack()
        self.nats: LocalNatsServer
        self.bus: Bus
        self.speaker: Speaker
        self.notice: NoticeNode
        self.replies: ReplyLog
        self.asr: AsrNode
        self.capture: CaptureNode

    async def start(self) -> None:
        """Start every node of the edge; what started is closed again if one fails."""
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise

    async def close(self) -> None:
        """Close every node, in reverse order of start."""
        await self._stack.aclose()

    async def _enter(self, name: str, component: AbstractAsyncContextManager[Any]) -> Any:
        began = time.monotonic()
        entered = await self._stack.enter_async_context(component)
        log.info("started %s (%.2f s)", name, time.monotonic() - began)
        return entered

    async def _start(self) -> None:
        config = self.config
        bridge_factory = self._bridge_factory
        if config.bridge.half is not None and bridge_factory is None:
            # Fail on a missing half or key before spending seconds on the models.
            check_bridge_files(config.bridge.half, config.bridge.secrets, config.device)
            bridge_factory = open_edge_bridge
        if self.models is None:
            began = time.monotonic()
            self.models = await Models.load(config)
            log.info("loaded models (%.2f s)", time.monotonic() - began)
        models = self.models
        device = config.device
        self.nats = await self._enter("nats", LocalNatsServer(config.nats.host, config.nats.port))
        # With a bridge on the board, turns and speech acks are asked of its half.
        asks_bridge = config.bridge.half is not None
        self.bus = await self._enter("bus", Bus(self.nats.url, asks_bridge=asks_bridge))
        sink = await self._enter("sink", self._sink or open_sink(config.audio))
        self.speaker = await self._enter(
            "speaker",
            Speaker(
                self.bus, models.synth, sink, self.gate, device=device, on_settled=self._settle
            ),
        )
        self.notice = await self._enter(
            "notice",
            NoticeNode(
                self.bus,
                self.speaker,
                models.synth,
                device=device,
                text=config.notice.text,
                failure_text=config.notice.failure_text,
                on_settled=self._settle,
                on_home_change=self._announce_home,
            ),
        )
        self.bus.on_not_taken = self.notice.on_not_taken
        self.replies = await self._enter("replies", ReplyLog(self.bus, device=device))
        self.asr = await self._enter(
            "asr", AsrNode(self.bus, models.recognizer, device=device, partials=config.asr.partials)
        )
        if config.bridge.half is not None and bridge_factory is not None:
            await self._enter(
                "bridge",
                bridge_factory(
                    half=config.bridge.half,
                    secrets=config.bridge.secrets,
                    nats_url=self.nats.url,
                    device=device,
                    outbox=config.bridge.outbox,
                ),
            )
        source = await self._enter("source", self._source or open_source(config.audio))
        button = self._button or open_button(config.endpointing.push_to_talk)
        if button is not None:
            button = await self._enter("button", button)
        endpointing = config.endpointing
        endpointer = Endpointer(endpointing.mode, endpointing.vad)
        self.asr.on_decoded = endpointer.on_decoded
        wake = wake_word(endpointing)
        self.capture = await self._enter(
            "capture",
            CaptureNode(
                source,
                self.gate,
                endpointer,
                self.asr,
                self.speaker,
                button=button,
                wake=wake,
                wake_config=endpointing.wake,
            ),
        )
        finite = isinstance(config.audio.input, WavInput) and self._source is None
        self.notifier.healthy = lambda: finite or self.capture.running
        await self._enter("systemd", self.notifier)
        self.notifier.notify(f"READY=1\nSTATUS={self._status()}")

    def _status(self) -> str:
        """systemd's STATUS= line: what `systemctl status tether-edge` shows."""
        status = f"listening as {self.config.device} on {self.nats.url}"
        if self.config.bridge.half is None:
            return f"{status}; local only (no bridge)"
        return f"{status}; home {self.home}"

    def _announce_home(self, reachable: bool, detail: str) -> None:
        self.home = "reachable" if reachable else f"unreachable ({detail})"
        self.notifier.notify(f"STATUS={self._status()}")

    def _settle(self, binding_id: str) -> None:
        self._settled.add(binding_id)
        self._settled_changed.set()

    def unanswered(self) -> list[str]:
        """Binding ids of turns that have had neither an answer played nor a notice."""
        return [t.binding_id for t in self.asr.turn_published if t.binding_id not in self._settled]

    async def drain(self, answer_timeout_s: float | None = None) -> list[str]:
        """After the input ends: wait for answers to every turn, then for queued speech.

        Returns the binding ids still unanswered when ``answer_timeout_s`` ran out.
        """
        timeout = self.config.run.answer_timeout_s if answer_timeout_s is None else answer_timeout_s
        await self.capture.exhausted.wait()
        await self.asr.wait_idle()
        deadline = time.monotonic() + timeout
        while self.unanswered() and (left := deadline - time.monotonic()) > 0:
            self._settled_changed.clear()
            try:
                await asyncio.wait_for(self._settled_changed.wait(), left)
            except TimeoutError:
                break
        await self.speaker.wait_idle()
        return self.unanswered() if timeout > 0 else []

    def summary(self) -> RunSummary:
        """Counters and events of this run."""
        return RunSummary(
            turns=[
                {"binding_id": t.binding_id, "text": t.text, "confidence": round(t.confidence, 3)}
                for t in self.asr.turn_published
            ],
            acks=[
                {
                    "binding_id": a.binding_id,
                    "ok": a.ok,
                    "interrupted": a.interrupted,
                    "error": a.error,
                }
                for a in self.speaker.acks
            ],
            unanswered=self.unanswered(),
            notices=self.notice.notices_played,
            not_taken=self.bus.not_taken,
            barge_ins=self.capture.barge_ins,
            wakes=self.capture.wakes,
            follow_ups=self.capture.follow_ups,
            echo_gate_dropped=self.gate.dropped,
            malformed_events=self.bus.malformed + self.speaker.stats.malformed,
        )
