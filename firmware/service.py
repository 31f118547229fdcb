"""The service config: what ``tether-edge.service`` runs (its ExecStart), read from YAML."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from shared.yaml_source import Reader, load_yaml, parse_yaml

DEFAULT_SERVICE_CONFIG = "edge-service.yaml"


@dataclass(frozen=True)
class ServiceConfig:
    """The command systemd starts as the board's edge service."""

    exec_start: str
    file: str


def _absolute_command(value: str) -> str | None:
    if not value.strip().startswith("/") or "\n" in value:
        return "must be one command line starting with an absolute path"
    return None


def parse_service_config(doc: Any, file: str) -> ServiceConfig:
    """Check a parsed service config; SchemaError names the file, line and key."""
    reader = Reader(file)
    data = reader.mapping(doc, "")
    reader.allow_keys(data, "", ("exec_start",))
    exec_start = reader.get(data, "exec_start", "", str, "", check=_absolute_command)
    reader.raise_if_any()
    return ServiceConfig(exec_start.strip(), file)


def load_service_config(path: Path | None) -> ServiceConfig:
    """Read ``path``, or the packaged default when it is None."""
    if path is None:
        name = f"firmware/board/{DEFAULT_SERVICE_CONFIG}"
        text = resources.files("firmware.board").joinpath(DEFAULT_SERVICE_CONFIG).read_text()
        return parse_service_config(parse_yaml(text, name), name)
    return parse_service_config(load_yaml(path), str(path))
