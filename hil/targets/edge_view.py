"""What hil needs to know of a board's edge.yaml, read from its text (pure, no I/O).

Only the keys hil uses: the device name, the audio spool folders, the bridge
half's path and the edge's NATS port. Everything else is the edge's business
(the board validates its own config when the service starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hil.runner import HilError
from shared.errors import ConfigurationError, SchemaError
from shared.yaml_source import LocatedDict, Reader, parse_yaml

SPOOL = "spool"


class EdgeConfigError(HilError, ConfigurationError):
    """The board's edge.yaml cannot be read for what hil needs; names file, line and key."""


@dataclass(frozen=True)
class EdgeView:
    """The board's edge, as its edge.yaml describes it."""

    device: str
    input_kind: str
    input_dir: str | None
    output_kind: str
    output_dir: str | None
    half: str | None
    nats_port: int
    grammar: tuple[str, ...] = ()


def parse_edge_view(text: str, file: str) -> EdgeView:
    """The view of edge.yaml ``text`` (``file`` names it in errors)."""
    try:
        doc = parse_yaml(text, file)
    except SchemaError as exc:
        raise EdgeConfigError(str(exc)) from exc
    r = Reader(file)
    top = r.mapping(doc, "")
    device = r.get(top, "device", "", str, "board", required=False)
    audio = _section(r, top, "audio")
    in_kind, in_dir = _audio(r, audio, "input")
    out_kind, out_dir = _audio(r, audio, "output")
    bridge = _section(r, top, "bridge")
    half = r.get(bridge, "half", "bridge", str, None, required=False)
    nats = _section(r, top, "nats")
    port = r.get(nats, "port", "nats", int, 0, required=False)
    asr = _section(r, top, "asr")
    grammar = tuple(text for text, _ in r.str_list(asr, "grammar", "asr", required=False))
    try:
        r.raise_if_any()
    except SchemaError as exc:
        raise EdgeConfigError(str(exc)) from exc
    return EdgeView(device, in_kind, in_dir, out_kind, out_dir, half, port, grammar)


def _section(r: Reader, top: LocatedDict, key: str) -> LocatedDict:
    if key not in top:
        empty = LocatedDict()
        empty.key_lines = {}
        empty.line = 0
        return empty
    return r.mapping(top[key], key, top, key)


def _audio(r: Reader, audio: LocatedDict, key: str) -> tuple[str, str | None]:
    if key not in audio:
        return "sounddevice", None
    section: Any = r.mapping(audio[key], f"audio.{key}", audio, key)
    kind = r.get(section, "kind", f"audio.{key}", str, "sounddevice", required=False)
    if kind != SPOOL:
        return kind, None
    folder = r.get(section, "dir", f"audio.{key}", str, "")
    return kind, folder or None
