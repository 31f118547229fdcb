"""The capture node: microphone frames through the echo gate and the endpointer into ASR.

It also reads the push-to-talk button: a press while the board speaks is a
barge-in (playback stops, the queue is dropped, the microphone opens at once).

In mode ``wake`` every admitted frame outside an utterance goes to the wake word
model first; a detection arms the endpointer for ``listen_s`` and plays the chime.
After the board speaks an answer, the endpointer is armed for the follow-up
window, longer when the answer asked a question.
"""

from __future__ import annotations

import asyncio
import logging
import time

from edge.asr import AsrNode
from edge.audio.base import AudioFrame, AudioSource
from edge.config import WakeConfig
from edge.echo_gate import EchoGate
from edge.endpoint.buttons import Button
from edge.endpoint.segmenter import Endpointer
from edge.errors import EdgeError
from edge.tts import Speaker
from edge.wake import WakeWord, chime
from shared.lifecycle import Service, cancel_and_wait

log = logging.getLogger(__name__)


class CaptureNode(Service):
    """Owns the capture and button tasks; ``exhausted`` is set when a finite source ends."""

    def __init__(
        self,
        source: AudioSource,
        gate: EchoGate,
        endpointer: Endpointer,
        asr: AsrNode,
        speaker: Speaker,
        *,
        button: Button | None = None,
        wake: WakeWord | None = None,
        wake_config: WakeConfig | None = None,
    ) -> None:
        self.source = source
        self.gate = gate
        self.endpointer = endpointer
        self.asr = asr
        self.speaker = speaker
        self.button = button
        self.exhausted = asyncio.Event()
        self.error: BaseException | None = None
        self.barge_ins = 0
        self.wake = wake
        self.wake_config = wake_config or WakeConfig()
        self.wakes = 0
        self.follow_ups = 0
        self._chime = None
        if wake is not None:
            if self.wake_config.chime:
                self._chime = chime(speaker.synth.sample_rate)
            speaker.on_answered = self.follow_up
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start the capture task (and the button task, with a button)."""
        self._tasks.append(asyncio.create_task(self._capture(), name="capture"))
        if self.button is not None:
            self._tasks.append(asyncio.create_task(self._buttons(self.button), name="button"))

    async def close(self) -> None:
        """Stop the capture and button tasks."""
        await cancel_and_wait(*self._tasks, reraise=False)
        self._tasks.clear()

    @property
    def running(self) -> bool:
        """True while frames are still being read from the source."""
        return not self.exhausted.is_set()

    async def _capture(self) -> None:
        try:
            async for frame in self.source.frames():
                if self.gate.admits(frame):
                    self._hear_wake(frame)
                    self.asr.feed(self.endpointer.on_frame(frame))
                elif self.endpointer.is_open and not self.endpointer.held:
                    # The board started speaking mid-utterance: what was heard so far stands.
                    self.asr.feed(self.endpointer.cut(frame.captured_at, "echo_gate"))
        # The capture loop's boundary: any failure is kept for the owner and logged.
        except Exception as exc:  # noqa: BLE001
            self.error = exc
            log.error("capture failed: %s", exc)
        finally:
            self.asr.feed(self.endpointer.cut(time.monotonic(), "end_of_input"))
            self.exhausted.set()
            log.info(
                "capture ended: %d frames admitted, %d refused by the echo gate",
                self.gate.admitted,
                self.gate.dropped,
            )

    def _hear_wake(self, frame: AudioFrame) -> None:
        if self.wake is None or self.endpointer.is_open:
            return
        probability = self.wake.feed(frame.pcm)
        if probability is None:
            return
        self.wakes += 1
        self.endpointer.arm(frame.ends_at + self.wake_config.listen_s, "wake", probability)
        log.info("heard the wake word %r (%.2f)", self.wake.phrase, probability)
        if self._chime is not None:
            self.speaker.say_local(self._chime, "chime", tail=False)

    def follow_up(self, answer: str, reopens_at: float) -> None:
        """The board spoke ``answer``; listen without the wake word once the mic reopens."""
        asked = answer.rstrip().endswith("?")
        window = self.wake_config.question_s if asked else self.wake_config.follow_up_s
        self.follow_ups += 1
        self.endpointer.arm(reopens_at + window, "follow_up")

    async def _buttons(self, button: Button) -> None:
        try:
            async for event in button.events():
                if event.pressed and (self.speaker.speaking or self.gate.speaking):
                    self.barge_ins += 1
                    self.speaker.barge_in()
                    # The speaker stops within one slice; the person wants the microphone now.
                    self.gate.speaking_ended(event.at, barge_in=True)
                self.asr.feed(self.endpointer.on_button(event.pressed, event.at))
        except EdgeError as exc:
            # Voice activity (if configured) still works; say loudly that the button does not.
            log.error("push-to-talk stopped: %s", exc)
