"""The shape every benchmark writes (DESIGN.md "Benchmarks"): a rich table and a JSON file."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class Result:
    """One measured figure, with its peer when it has one."""

    metric: str
    value: float
    unit: str
    n: int
    peer: str | None = None
    peer_value: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """value / peer_value."""
        if self.peer_value in (None, 0):
            return None
        return self.value / self.peer_value  # type: ignore[operator]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_report(name: str, results: list[Result], out_dir: Path = Path("bench-results")) -> Path:
    """Print the table and write ``bench-results/NAME.json``."""
    table = Table(title=f"bench: {name}")
    for column in ("metric", "value", "unit", "n", "peer", "peer value", "ratio", "note"):
        table.add_column(column, overflow="fold")
    for r in results:
        table.add_row(
            r.metric,
            f"{r.value:.4g}",
            r.unit,
            str(r.n),
            r.peer or "",
            "" if r.peer_value is None else f"{r.peer_value:.4g}",
            "" if r.ratio is None else f"{r.ratio:.3g}",
            r.note,
        )
    Console().print(table)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    document = {
        "name": name,
        "when": datetime.now(UTC).isoformat(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "python": platform.python_version(),
            # Other work on a shared machine moves absolute figures; ratios less so.
            "load_average_1m": os.getloadavg()[0],
        },
        "results": [{**asdict(r), "ratio": r.ratio} for r in results],
    }
    path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    return path
