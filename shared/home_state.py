"""The home state file, ``<data dir>/home.json``: what a running home says about itself.

``home up`` writes it once it is up (:meth:`HomeState.save`, atomically) and removes
it when it stops; everything that looks for a running home on a data directory
reads it through :meth:`HomeState.load`: the ``home`` CLI, ``edge ... --data-dir``,
the HIL targets. Nobody reads its keys by hand.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shared.errors import ContractError, InputError
from shared.files import write_atomic

STATE_FILE = "home.json"


class HomeStateError(ContractError, InputError):
    """The state file is missing, unreadable, or not a home state (names the file)."""


@dataclass(frozen=True)
class HomeState:
    """What a running home publishes about itself in ``home.json``."""

    pid: int
    data_dir: str
    nats_url: str
    monitor_url: str | None
    started_at: str
    components: dict[str, dict[str, Any]]
    # The member's name when the home is spread over machines; its CLI asks this member.
    member: str | None = None

    def to_json(self) -> str:
        """The state file's text."""
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str, file: str) -> HomeState:
        """Parse a state file; HomeStateError naming ``file`` if it is not one."""
        try:
            data = json.loads(text)
            return cls(
                pid=int(data["pid"]),
                data_dir=str(data["data_dir"]),
                nats_url=str(data["nats_url"]),
                monitor_url=data.get("monitor_url"),
                started_at=str(data["started_at"]),
                components=dict(data.get("components") or {}),
                member=data.get("member"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise HomeStateError(f"{file} is not a readable home state file: {exc}") from exc

    @classmethod
    def load(cls, data_dir: Path) -> HomeState:
        """The state of the home on ``data_dir``; HomeStateError if there is none to read."""
        path = state_file(data_dir)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise HomeStateError(f"{path}: {exc}") from exc
        return cls.from_json(text, str(path))

    def save(self, data_dir: Path) -> None:
        """Write the state file atomically: a reader sees the old file or the whole new one."""
        write_atomic(state_file(data_dir), self.to_json())


def state_file(data_dir: Path) -> Path:
    """Where the home on ``data_dir`` keeps its state file."""
    return data_dir / STATE_FILE
