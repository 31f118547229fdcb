"""The endpointer and the echo gate as pure state machines, on synthetic frames."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

from edge.audio.base import AudioFrame, SampleClock
from edge.config import VadConfig
from edge.echo_gate import EchoGate
from edge.endpoint import (
    Endpointer,
    GpioValueButton,
    TerminalKeyButton,
    UtteranceAudio,
    UtteranceEnd,
    UtteranceStart,
    frame_level_db,
)
from edge.errors import ButtonError

RATE = 16000
BLOCK = 1600  # 100 ms


def frame(at: float, *, loud: bool) -> AudioFrame:
    t = np.arange(BLOCK) / RATE
    amplitude = 8000 if loud else 30
    pcm = (amplitude * np.sin(2 * np.pi * 440 * t)).astype("<i2").tobytes()
    return AudioFrame(pcm, RATE, at)


def feed(endpointer: Endpointer, pattern: str, start: float = 0.0) -> list[object]:
    """Feed one 100 ms frame per character: '#' loud, '.' quiet."""
    events: list[object] = []
    for i, c in enumerate(pattern):
        events += endpointer.on_frame(frame(start + i * 0.1, loud=c == "#"))
    return events


VAD = VadConfig(threshold_db=-40, start_ms=200, end_silence_ms=300, pre_roll_ms=200)


def test_levels() -> None:
    assert frame_level_db(frame(0, loud=True).pcm) > -20
    assert frame_level_db(frame(0, loud=False).pcm) < -60
    assert frame_level_db(b"\0\0" * 100) == -120.0


def test_vad_opens_with_pre_roll_and_closes_after_silence() -> None:
    ep = Endpointer("vad", VAD)
    events = feed(ep, "....####....")
    starts = [e for e in events if isinstance(e, UtteranceStart)]
    ends = [e for e in events if isinstance(e, UtteranceEnd)]
    audio = [e for e in events if isinstance(e, UtteranceAudio)]
    assert len(starts) == 1 and len(ends) == 1
    # Two frames of pre-roll (200 ms) before the first loud frame at 0.4 s.
    assert starts[0].at == pytest.approx(0.2)
    assert ends[0].reason == "vad"
    assert ends[0].speech_ended_at == pytest.approx(0.8)
    assert ends[0].at == pytest.approx(1.1)
    assert len(audio) == 2 + 4 + 3
    assert not ep.is_open


def test_a_click_shorter_than_start_ms_opens_nothing() -> None:
    ep = Endpointer("vad", VAD)
    assert feed(ep, "..#..#..") == []


def test_max_length_closes_a_long_utterance() -> None:
    ep = Endpointer("vad", VadConfig(threshold_db=-40, start_ms=100, max_utterance_s=1.0))
    ends = [e for e in feed(ep, "#" * 15) if isinstance(e, UtteranceEnd)]
    assert [e.reason for e in ends] == ["max_length"]


def test_push_to_talk_is_press_to_release_whatever_the_level() -> None:
    ep = Endpointer("push_to_talk", VAD)
    assert feed(ep, "####") == []  # VAD is off in this mode
    assert ep.on_button(True, 1.0) == [UtteranceStart(1.0, "push_to_talk")]
    audio = feed(ep, "..#..", start=1.0)
    assert all(isinstance(e, UtteranceAudio) for e in audio) and len(audio) == 5
    end = ep.on_button(False, 1.5)
    assert end == [UtteranceEnd(1.5, 1.5, "push_to_talk")]


def test_in_both_mode_the_button_takes_over_an_utterance_vad_opened() -> None:
    ep = Endpointer("both", VAD)
    feed(ep, "###")
    assert ep.is_open
    assert ep.on_button(True, 0.3) == []
    # Silence would close a VAD utterance; while held it does not.
    assert not [e for e in feed(ep, "......", start=0.3) if isinstance(e, UtteranceEnd)]
    assert [e.reason for e in ep.on_button(False, 1.0) if isinstance(e, UtteranceEnd)] == [
        "push_to_talk"
    ]


def test_cut_closes_an_open_utterance_only() -> None:
    ep = Endpointer("vad", VAD)
    assert ep.cut(0.0, "end_of_input") == []
    feed(ep, "###")
    (end,) = ep.cut(0.35, "end_of_input")
    assert isinstance(end, UtteranceEnd) and end.reason == "end_of_input"


def test_echo_gate_refuses_frames_while_speaking_and_in_the_tail() -> None:
    now = [10.0]
    gate = EchoGate(0.3, clock=lambda: now[0])
    assert gate.admits(frame(9.8, loud=True))
    gate.speaking_started()
    assert not gate.admits(frame(9.95, loud=True))  # overlaps the start
    assert not gate.admits(frame(11.0, loud=True))
    now[0] = 12.0
    gate.speaking_ended()
    assert not gate.admits(frame(12.1, loud=True))  # in the tail
    assert not gate.admits(frame(12.25, loud=True))  # ends in the tail... and past it
    assert gate.admits(frame(12.3, loud=True))
    assert (gate.admitted, gate.dropped) == (2, 4)


def test_a_barge_in_reopens_the_gate_without_a_tail() -> None:
    now = [5.0]
    gate = EchoGate(0.5, clock=lambda: now[0])
    gate.speaking_started()
    gate.speaking_ended(6.0, barge_in=True)
    assert gate.admits(frame(6.0, loud=True))
    assert not gate.admits(frame(5.95, loud=True))


async def test_gpio_button_reports_debounced_presses(tmp_path: Path) -> None:
    value = tmp_path / "value"
    value.write_text("1\n")  # active low: 1 is released
    async with GpioValueButton(value, poll_ms=2) as button:
        events = button.events()
        value.write_text("0\n")
        pressed = await asyncio.wait_for(anext(events), 5)
        value.write_text("1\n")
        released = await asyncio.wait_for(anext(events), 5)
        await events.aclose()  # type: ignore[attr-defined]
    assert (pressed.pressed, released.pressed) == (True, False)
    assert released.at >= pressed.at


async def test_gpio_button_names_a_bad_value_file(tmp_path: Path) -> None:
    with pytest.raises(ButtonError, match="cannot read"):
        async with GpioValueButton(tmp_path / "missing"):
            pass
    bad = tmp_path / "value"
    bad.write_text("high")
    with pytest.raises(ButtonError, match="expected 0 or 1"):
        async with GpioValueButton(bad):
            pass


async def test_a_terminal_key_toggles_talking(tmp_path: Path) -> None:
    leader, follower = os.openpty()
    try:
        async with TerminalKeyButton(" ", fd=follower) as button:
            events = button.events()
            os.write(leader, b"x ")
            pressed = await asyncio.wait_for(anext(events), 5)
            os.write(leader, b" ")
            released = await asyncio.wait_for(anext(events), 5)
            await events.aclose()  # type: ignore[attr-defined]
    finally:
        os.close(leader)
        os.close(follower)
    assert (pressed.pressed, released.pressed) == (True, False)


async def test_a_terminal_key_needs_a_terminal(tmp_path: Path) -> None:
    with (tmp_path / "file").open("w") as not_a_tty, pytest.raises(ButtonError, match="terminal"):
        async with TerminalKeyButton(" ", fd=not_a_tty.fileno()):
            pass


STABLE = VadConfig(
    threshold_db=-40, start_ms=200, end_silence_ms=600, pre_roll_ms=200, stable_end_ms=200
)


def test_a_settled_transcript_ends_the_utterance_before_the_full_silence() -> None:
    ep = Endpointer("vad", STABLE)
    feed(ep, "####")
    assert ep.on_decoded(0.4, changed=True, has_words=True, at=0.45) == []  # words at 0.4 s
    feed(ep, "...", start=0.4)
    assert ep.on_decoded(0.5, changed=False, has_words=True, at=0.55) == []  # 100 ms decoded
    (end,) = ep.on_decoded(0.6, changed=False, has_words=True, at=0.72)
    assert isinstance(end, UtteranceEnd) and end.reason == "vad"
    assert end.speech_ended_at == pytest.approx(0.4) and end.at == pytest.approx(0.72)
    assert not ep.is_open
    assert ep.on_decoded(0.7, changed=False, has_words=True, at=0.8) == []  # closed already


def test_the_last_word_named_a_block_late_is_no_change_in_the_quiet() -> None:
    for late_by, ends_at in ((0.1, 0.6), (0.2, 0.8)):
        ep = Endpointer("vad", STABLE)
        feed(ep, "####")  # the voice ends at 0.4 s
        feed(ep, "..", start=0.4)
        # The recognizer names the last word in the first block of quiet: catching up,
        # and the utterance ends 200 ms after the voice; one block later it is a word
        # in the quiet, and the quiet must hold 200 ms after it.
        assert ep.on_decoded(0.4 + late_by, changed=True, has_words=True, at=0.5) == []
        ends = ep.on_decoded(0.6, changed=False, has_words=True, at=0.62)
        assert [type(e) for e in ends] == ([UtteranceEnd] if ends_at == 0.6 else [])
        if ends_at > 0.6:
            feed(ep, "..", start=0.6)
            ends = ep.on_decoded(ends_at, changed=False, has_words=True, at=ends_at + 0.01)
            assert [type(e) for e in ends] == [UtteranceEnd]


def test_a_transcript_still_changing_waits_for_the_full_silence() -> None:
    ep = Endpointer("vad", STABLE)
    feed(ep, "####")
    for i in range(1, 6):  # the recognizer keeps revising its words through the quiet
        assert not [e for e in feed(ep, ".", start=0.3 + i * 0.1) if isinstance(e, UtteranceEnd)]
        assert ep.on_decoded(0.4 + i * 0.1, changed=True, has_words=True, at=0.5 + i * 0.1) == []
    (end,) = [e for e in feed(ep, ".", start=0.9) if isinstance(e, UtteranceEnd)]
    assert end.at == pytest.approx(1.0)  # end_silence_ms after the voice


def test_voice_again_before_the_decoder_catches_up_keeps_the_utterance_open() -> None:
    ep = Endpointer("vad", STABLE)
    feed(ep, "####...#")  # the capture side heard voice again at 0.7 s
    assert ep.on_decoded(0.7, changed=False, has_words=True, at=0.8) == []
    assert ep.is_open


def test_no_words_or_switched_off_waits_for_the_full_silence() -> None:
    off = VadConfig(**{**STABLE.__dict__, "stable_end_ms": 0})
    for vad, has_words in ((STABLE, False), (off, True)):
        ep = Endpointer("vad", vad)
        feed(ep, "####....")
        assert ep.on_decoded(0.8, changed=False, has_words=has_words, at=0.85) == []
        ends = [e for e in feed(ep, "..", start=0.8) if isinstance(e, UtteranceEnd)]
        assert [e.at for e in ends] == [pytest.approx(1.0)]


def test_captured_blocks_are_stamped_by_their_samples_not_by_when_they_arrived() -> None:
    clock = SampleClock(16000)
    block = 800  # 50 ms
    # Blocks handed over in bursts: arrivals late by 0-40 ms, never early.
    arrivals = [0.05, 0.14, 0.15, 0.23, 0.25, 0.30, 0.39, 0.40]
    stamps = [clock.stamp(at, block) for at in arrivals]
    steps = np.diff(stamps)
    assert steps == pytest.approx([0.05] * 7) and stamps[0] == pytest.approx(0.0)
    assert clock.anchors == 1
    # A block that arrives before its count says moves the count back to it.
    assert clock.stamp(0.43, block) == pytest.approx(0.38)
    # Blocks dropped (an overflow): the next arrives a second late and anchors again.
    assert clock.stamp(1.5, block) == pytest.approx(1.45) and clock.anchors == 2
