"""The capture node: microphone frames through the echo gate and the endpointer into ASR.

It also reads the push-to-talk button: a press while the board speaks is a
barge-in (playback stops, the queue is dropped, the microphone opens at once).
"""

from __future__ import annotations

import asyncio
import logging
import time

from edge.asr import AsrNode
from edge.audio.base import AudioSource
from edge.echo_gate import EchoGate
from edge.endpoint.buttons import Button
from edge.endpoint.segmenter import Endpointer
from edge.errors import EdgeError
from edge.tts import Speaker
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
