"""Benchmark results: a rich table on screen, JSON in bench-results/.

The format is docs/architecture.md "Benchmarks".
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hil.wait import percentile

RESULTS_DIR = Path(os.environ.get("BENCH_RESULTS", "bench-results"))


@dataclass
class Result:
    """One measured figure, with its peer's figure from the same run when there is one."""

    metric: str
    value: float
    unit: str
    n: int
    peer: str | None = None
    peer_value: float | None = None
    note: str = ""
    # What the figure is of, for scripts: e.g. {"age_days": 90, "half": "held-out"}.
    labels: dict[str, str | float] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """value / peer_value, when a peer was measured."""
        if self.peer_value in (None, 0):
            return None
        return self.value / self.peer_value  # type: ignore[operator]


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank (:func:`hil.wait.percentile`)."""
    return percentile(values, q * 100)


def machine() -> dict[str, object]:
    """What ran the benchmark."""
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "model": model, "python": platform.python_version()}


def publish(name: str, results: list[Result]) -> Path:
    """Print the table and write ``bench-results/NAME.json``; return the file."""
    table = Table(title=f"benchmark: {name}")
    for col in ("metric", "value", "unit", "n", "peer", "peer value", "ratio", "note"):
        table.add_column(
            col, justify="right" if col in ("value", "n", "peer value", "ratio") else "left"
        )
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
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"{name}.json"
    doc = {
        "name": name,
        "when": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "results": [asdict(r) | {"ratio": r.ratio} for r in results],
    }
    out.write_text(json.dumps(doc, indent=2))
    return out
