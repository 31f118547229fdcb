"""Mode wake: the wake word arms the endpointer, an answer opens a follow-up window.

Pure endpointer cases on synthetic frames; the real wake word models from the
``pymicro-wakeword`` wheel on speech from the board's own Piper voice and
espeak-ng; and a running edge on a spool microphone, where a follow-up within
the window is a turn without the wake word and the same utterance after it is not.
"""

from __future__ import annotations

import asyncio
import subprocess
import wave
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edge.config import (
    AsrConfig,
    EdgeConfig,
    EndpointingConfig,
    SpoolInput,
    SpoolOutput,
    VadConfig,
    WakeConfig,
)
from edge.endpoint import Endpointer, UtteranceAudio, UtteranceEnd, UtteranceStart
from edge.runtime import EdgeRuntime, Models
from edge.tts import PiperSynthesizer
from edge.wake import QUIET_HANGOVER_S, TUNED_CUTOFFS, WAKE_MODELS, WakeWord, chime
from shared.event import Event
from shared.messages.voice import Heard, Turn
from shared.subjects import speak_subject
from tests.edge.conftest import GRAMMAR, Collector, connect, speak_korean, wait_for
from tests.edge.test_endpointing import feed, frame

VAD = VadConfig(threshold_db=-40, start_ms=200, end_silence_ms=300, pre_roll_ms=200)


def test_without_the_wake_word_voice_opens_nothing() -> None:
    ep = Endpointer("wake", VAD)
    assert feed(ep, "....########....") == []
    assert not ep.is_open


def test_the_wake_word_arms_the_endpointer_and_forgets_what_came_before() -> None:
    ep = Endpointer("wake", VAD)
    assert feed(ep, "..####") == []  # the wake word itself, loud, before the detection
    ep.arm(0.6 + 2.0, "wake", probability=0.97)
    events = feed(ep, "..###....", start=0.6)
    (start,) = [e for e in events if isinstance(e, UtteranceStart)]
    assert start.reason == "wake" and start.wake_probability == 0.97
    audio = [e.frame.captured_at for e in events if isinstance(e, UtteranceAudio)]
    assert min(audio) >= 0.6 - 1e-9  # nothing of the wake word is in the utterance
    (end,) = [e for e in events if isinstance(e, UtteranceEnd)]
    assert end.level_db > -20
    # Closing disarms: the next speech needs the wake word again.
    assert feed(ep, "....####....", start=2.0) == []


def test_an_armed_window_that_runs_out_opens_nothing() -> None:
    ep = Endpointer("wake", VAD)
    ep.arm(1.0, "follow_up")
    assert feed(ep, "######", start=1.05) == []
    ep.arm(3.0, "follow_up")
    (start,) = [e for e in feed(ep, "###", start=2.0) if isinstance(e, UtteranceStart)]
    assert start.reason == "follow_up" and start.wake_probability is None


def test_the_level_is_how_loud_the_voiced_frames_were() -> None:
    levels = []
    for gain in (0.1, 1.0):
        ep = Endpointer("vad", VadConfig(threshold_db=-60, start_ms=200, end_silence_ms=300))
        events: list[object] = []
        for i, c in enumerate("..####...."):
            f = frame(i * 0.1, loud=c == "#")
            pcm = (np.frombuffer(f.pcm, dtype="<i2") * gain).astype("<i2").tobytes()
            events += ep.on_frame(replace(f, pcm=pcm))
        (end,) = [e for e in events if isinstance(e, UtteranceEnd)]
        levels.append(end.level_db)
    assert levels[1] - levels[0] == pytest.approx(20.0, abs=0.5)


def test_heard_travels_in_the_turn_payload_and_bad_values_are_named() -> None:
    heard = Heard(-23.456, 0.98765)
    assert heard.to_json() == {"level_db": -23.46, "wake_probability": 0.9877}
    assert Heard.from_payload({"heard": heard.to_json()}) == Heard(-23.46, 0.9877)
    assert Heard.from_payload({}) is None
    with pytest.raises(Exception, match=r"payload\.heard\.level_db"):
        Heard.from_payload({"heard": {"level_db": "loud"}})
    with pytest.raises(Exception, match=r"payload\.heard\.level_db"):
        Heard.from_payload({"heard": {"wake_probability": 0.9}})
    with pytest.raises(Exception, match=r"payload\.heard"):
        Heard.from_payload({"heard": [1, 2]})


def piper_wav(synth: PiperSynthesizer, text: str, out: Path) -> Path:
    """``text`` in the board's own voice as 16 kHz mono 16-bit, with 0.5 s of silence around."""
    raw = out.with_suffix(".raw.wav")
    with wave.open(str(raw), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(synth.sample_rate)
        wav.writeframes(synth.render(text).tobytes())
    subprocess.run(
        ["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(out), "pad", "0.5", "0.5"],
        check=True,
        timeout=30,
    )
    raw.unlink()
    return out


def pcm16(path: Path) -> bytes:
    with wave.open(str(path), "rb") as wav:
        assert wav.getframerate() == 16000
        return wav.readframes(wav.getnframes())


def heard_by(model: str, pcm: bytes) -> int:
    """How many times ``model`` detected its wake word in ``pcm``, fed 100 ms at a time."""
    wake = WakeWord(model)
    for i in range(0, len(pcm), 3200):
        wake.feed(pcm[i : i + 3200])
    return wake.detections


def test_each_wake_word_model_hears_its_own_phrase_and_not_the_others(
    models: Models, tmp_path: Path
) -> None:
    phrases = {"okay_nabu": "Okay Nabu.", "hey_jarvis": "Hey Jarvis.", "alexa": "Alexa."}
    phrases["hey_mycroft"] = "Hey Mycroft."
    assert set(phrases) == set(WAKE_MODELS)
    clips = {
        m: pcm16(piper_wav(models.synth, p, tmp_path / f"{m}.wav")) for m, p in phrases.items()
    }
    for model in WAKE_MODELS:
        assert heard_by(model, clips[model]) == 1, model
        assert all(heard_by(model, clips[o]) == 0 for o in WAKE_MODELS if o != model), model
    korean = pcm16(speak_korean("안녕하세요 감사합니다", tmp_path / "ko.wav"))
    assert all(heard_by(m, korean) == 0 for m in WAKE_MODELS)


def test_the_model_sleeps_through_quiet_and_still_hears_the_wake_word_after_it(
    models: Models, tmp_path: Path
) -> None:
    clip = np.frombuffer(pcm16(piper_wav(models.synth, "Okay Nabu.", tmp_path / "w.wav")), "<i2")
    hiss = np.random.default_rng(3).standard_normal(16000 * 20) * 30  # about -61 dBFS
    room = np.concatenate([hiss, clip + hiss[: len(clip)], hiss[:8000]])
    pcm = np.clip(room, -32768, 32767).astype("<i2").tobytes()
    heard = {}
    for label, speech_db in (("asleep in quiet", VadConfig.threshold_db), ("always awake", -200.0)):
        wake = WakeWord("okay_nabu", speech_db=speech_db)
        blocks = [wake.feed(pcm[i : i + 1600]) for i in range(0, len(pcm), 1600)]
        heard[label] = [i for i, p in enumerate(blocks) if p is not None], wake.held_back
    (asleep, held_back), (awake, never) = heard["asleep in quiet"], heard["always awake"]
    # Heard once, as soon (the model's 30 ms steps may fall apart from the 50 ms blocks).
    assert len(asleep) == len(awake) == 1
    assert abs(asleep[0] - awake[0]) <= 1
    assert never == 0
    assert held_back >= (20 - QUIET_HANGOVER_S) * 20 - 1  # every quiet 50 ms block after a second


def test_the_board_uses_the_wake_suites_cutoff_unless_its_config_names_one() -> None:
    for model in WAKE_MODELS:
        tuned = WakeWord(model)
        assert tuned.cutoff == TUNED_CUTOFFS[model] <= tuned.own_cutoff, model
    assert WakeWord("alexa", cutoff=0.9).cutoff == 0.9


def test_an_unknown_wake_word_model_is_named() -> None:
    with pytest.raises(Exception, match=r"'hey_tether': not one of okay_nabu"):
        WakeWord("hey_tether")


def test_the_chime_is_short_and_quiet() -> None:
    tone = chime(22050)
    assert len(tone) / 22050 == pytest.approx(0.12, abs=0.01)
    assert 0 < np.abs(tone).max() < 0.2 * 32767


def _drop(folder: Path, name: str, clip: Path) -> None:
    """Into the spool microphone the way a harness must: NAME.tmp, then renamed."""
    tmp = folder / f"{name}.tmp"
    tmp.write_bytes(clip.read_bytes())
    tmp.rename(folder / f"{name}.wav")


def _concat(out: Path, *clips: Path) -> Path:
    subprocess.run(["sox", *map(str, clips), str(out)], check=True, timeout=30)
    return out


async def _answer(bus: Collector, turn: Turn, text: str) -> None:
    speak = Event.new(
        "speak",
        {"text": text},
        source="agent.edge_asr",
        sequence_number=0,
        binding_id=turn.binding_id,
    )
    await bus.publish(speak_subject("edge_asr", "board"), speak)


@pytest.mark.slow
async def test_a_follow_up_in_the_window_is_a_turn_and_the_same_words_after_it_are_not(
    models: Models, tmp_path: Path
) -> None:
    spool_in, spool_out = tmp_path / "mic", tmp_path / "speaker"
    wake_then_hello = _concat(
        tmp_path / "wake_hello.wav",
        piper_wav(models.synth, "Okay Nabu.", tmp_path / "wake.wav"),
        speak_korean("안녕하세요", tmp_path / "hello.wav", lead_s=0.2),
    )
    thanks = speak_korean("감사합니다", tmp_path / "thanks.wav", lead_s=0.2)
    window = WakeConfig(follow_up_s=3.0, question_s=6.0)
    config = EdgeConfig(
        asr=AsrConfig(grammar=GRAMMAR),
        endpointing=EndpointingConfig(mode="wake", wake=window),
    )
    config = replace(
        config,
        audio=replace(config.audio, input=SpoolInput(spool_in), output=SpoolOutput(spool_out)),
    )
    async with EdgeRuntime(config, models=models) as edge:
        client = await connect(edge.nats.url)
        try:
            bus = Collector(client)
            turns = edge.asr.turn_published
            # Without the wake word, nothing is a turn.
            _drop(spool_in, "01-thanks", thanks)
            await wait_for(lambda: not (spool_in / "01-thanks.wav").exists(), "the clip taken")
            await asyncio.sleep(2.5)  # the clip's length, heard in real time
            assert turns == [] and edge.capture.wakes == 0
            # The wake word, then the words: one turn, without the wake word in it.
            _drop(spool_in, "02-wake", wake_then_hello)
            await wait_for(lambda: len(turns) == 1, "the turn after the wake word")
            assert edge.capture.wakes == 1
            assert turns[0].text == "안녕하세요"
            assert turns[0].heard is not None and turns[0].heard.wake_probability
            # An answer that asks: the window stays open longer than follow_up_s.
            await _answer(bus, turns[0], "Hello. Anything else?")
            await wait_for(lambda: len(edge.speaker.acks) == 1, "the answer played")
            await asyncio.sleep(window.follow_up_s + 0.5)
            _drop(spool_in, "03-thanks", thanks)
            await wait_for(lambda: len(turns) == 2, "the follow-up turn")
            assert turns[1].text == "감사합니다" and turns[1].heard is not None
            assert turns[1].heard.wake_probability is None
            # A plain answer: after its window, the same words are not a turn.
            await _answer(bus, turns[1], "You are welcome.")
            await wait_for(lambda: len(edge.speaker.acks) == 2, "the second answer played")
            await asyncio.sleep(window.follow_up_s + 0.5)
            admitted = edge.gate.admitted
            _drop(spool_in, "04-thanks", thanks)
            await wait_for(lambda: edge.gate.admitted > admitted + 20, "the late clip heard")
            await asyncio.sleep(1.0)
            assert len(turns) == 2
            assert edge.summary().follow_ups == 2 and edge.summary().wakes == 1
        finally:
            await client.close()
