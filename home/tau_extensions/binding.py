"""The per-run binding file: which flow the current turn belongs to.

The node writes it before each prompt; the extensions re-read it on every
publish, so everything a turn puts on the bus carries that turn's
``binding_id`` (and the device its answer goes to) without the τ process ever
being restarted or told anything over stdio.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from home.tau_extensions.errors import BindingFileError
from shared.errors import SubjectError
from shared.files import write_atomic
from shared.subjects import check_binding_id, check_name


@dataclass(frozen=True)
class TurnBinding:
    """The flow of the turn in flight: its binding id, device and the event that started it.

    ``reprompt`` marks a prompt that is not something the user said (the node's one
    re-prompt after a refusal to speak, a delegated task, a delegation's answer), so the
    memory reflex leaves it alone.
    ``schema`` is the activation schema that routed the turn (``routed_by_schema``):
    everything the turn publishes is stamped ``produced_by_schema`` with it.
    """

    binding_id: str
    device: str | None
    event_id: str
    turn: int
    reprompt: bool = False
    schema: str | None = None

    def __post_init__(self) -> None:
        check_binding_id(self.binding_id)
        if self.device is not None:
            check_name(self.device, "device")


def write_binding(path: Path, binding: TurnBinding) -> None:
    """Replace the binding file atomically (a reader never sees half a file)."""
    write_atomic(path, json.dumps(asdict(binding)))


def read_binding(path: Path) -> TurnBinding:
    """Read the binding file; raise BindingFileError naming the file and the problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BindingFileError(f"{path}: no binding yet (no turn has started)") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise BindingFileError(f"{path}: unreadable binding file: {exc}") from exc
    if not isinstance(data, dict):
        raise BindingFileError(f"{path}: expected a JSON object")
    try:
        return TurnBinding(
            binding_id=str(data["binding_id"]),
            device=None if data.get("device") is None else str(data["device"]),
            event_id=str(data["event_id"]),
            turn=int(data["turn"]),
            reprompt=data.get("reprompt", False) is True,
            schema=data["schema"] if isinstance(data.get("schema"), str) else None,
        )
    except (KeyError, TypeError, ValueError, SubjectError) as exc:
        raise BindingFileError(f"{path}: malformed binding file: {exc!r}") from exc
