"""A board profile: where a board keeps its edge.yaml and the commands hil runs to read it.

The packaged default (``board-systemd.yaml``) is a flashed board's: systemd
and journald. A board without systemd (or a test's stand-in board) gives its
own file with ``--board-profile``; every key it leaves out keeps the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hil.runner import HilError
from shared.errors import ConfigurationError, SchemaError
from shared.yaml_source import Reader, load_yaml

DEFAULT_PROFILE = Path(__file__).with_name("board-systemd.yaml")
COMMANDS = ("state", "restarts", "pid", "logs", "version", "play")


class ProfileError(HilError, ConfigurationError):
    """A board profile file that cannot be used; the message names file, line and key."""


@dataclass(frozen=True)
class BoardProfile:
    """The edge.yaml path on the board, its service name, and one shell command per reading."""

    config: str
    service: str
    commands: dict[str, str]

    def command(self, name: str, **values: str | int) -> str:
        """The ``name`` command with ``{service}`` and ``values`` filled in."""
        return self.commands[name].format(service=self.service, **values)


def load_profile(path: Path | None = None) -> BoardProfile:
    """The default profile, overlaid with ``path`` when given."""
    base = _read(DEFAULT_PROFILE, None)
    return base if path is None else _read(path, base)


def _read(path: Path, base: BoardProfile | None) -> BoardProfile:
    try:
        doc = load_yaml(path)
    except OSError as exc:
        raise ProfileError(f"cannot read board profile {path}: {exc}") from exc
    except SchemaError as exc:
        raise ProfileError(str(exc)) from exc
    r = Reader(str(path))
    top = r.mapping(doc, "")
    r.allow_keys(top, "", ("config", "service", "commands"))
    required = base is None
    config = r.get(top, "config", "", str, base.config if base else "", required=required)
    service = r.get(top, "service", "", str, base.service if base else "", required=required)
    commands = dict(base.commands) if base else {}
    if "commands" in top:
        given = r.mapping(top["commands"], "commands", top, "commands")
        r.allow_keys(given, "commands", COMMANDS)
        for name in given:
            if name in COMMANDS:
                commands[name] = r.get(given, name, "commands", str)
    for name in COMMANDS:
        if name not in commands:
            r.issue(top, "commands", f"commands.{name}", "is required but missing")
    try:
        r.raise_if_any()
    except SchemaError as exc:
        raise ProfileError(str(exc)) from exc
    return BoardProfile(config, service, commands)
