"""The home a board is bridged to, read through its data folder and ``home status --json``.

For the ssh and qemu targets home is a ``home up`` already running on this
machine (the board reaches it over its bridge); hil only watches it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil.runner import HilError
from shared.bus_credentials import home_admin_url
from shared.home_state import HomeState, HomeStateError


def tool(name: str) -> str:
    """The console script ``name`` of this installation (beside this Python), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else name


@dataclass(frozen=True)
class HomeSide:
    """A running ``home up`` by its ``--data-dir``."""

    data_dir: Path

    def nats_url(self) -> str:
        """Home's NATS URL, from the ``home.json`` that ``home up`` writes while it runs,
        carrying the home's admin credentials (its bus admits no one without)."""
        try:
            url = HomeState.load(self.data_dir).nats_url
        except HomeStateError as exc:
            raise HilError(
                f"no running home at {self.data_dir} ({exc}); start it with "
                f"`home up --data-dir {self.data_dir}`"
            ) from None
        return home_admin_url(self.data_dir, url)

    def half(self, device: str) -> Path:
        """Home's copy of the edge half it paired ``device`` with."""
        return self.data_dir / "bridge" / f"{device}.edge.yaml"

    def status(self) -> dict[str, Any]:
        """``home status --json``, or {} when home does not answer."""
        run = subprocess.run(
            [tool("home"), "status", "--json", "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        try:
            return dict(json.loads(run.stdout))
        except (json.JSONDecodeError, TypeError):
            return {}

    def components(self) -> dict[str, str]:
        """Each home component as ``home/NAME`` and ``active`` when healthy, else its state."""
        out = {}
        for component in self.status().get("components", []):
            state = component.get("state")
            out[f"home/{component.get('name')}"] = "active" if state == "healthy" else str(state)
        return out

    def link_up(self, device: str) -> bool:
        """True while home's bridge component reports ``device`` connected."""
        for component in self.status().get("components", []):
            if component.get("name") == "bridge":
                return f"{device} up" in str(component.get("detail", ""))
        return False
