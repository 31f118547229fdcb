"""The slowest case of a fuzzed boundary, measured and reported (never asserted).

Issue 23 asks every boundary's fuzz suite for "bounded time, measured, not a
timer assertion". Each suite keeps one :class:`Slowest` per boundary, wraps every
handled case in :meth:`Slowest.timed`, and a module fixture calls
:func:`report` at the end: it prints the slowest case and merges it into
``bench-results/fuzz_boundaries.json`` (one entry per boundary, the last run's).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from tests.bench.report import RESULTS_DIR, machine

REPORT_FILE = "fuzz_boundaries.json"
CASE_CHARS = 160


@dataclass
class Slowest:
    """The slowest of the cases one boundary handled, and how many it handled."""

    boundary: str
    seconds: float = 0.0
    case: str = ""
    cases: int = 0

    @contextlib.contextmanager
    def timed(self, case: object) -> Iterator[None]:
        """Time the block as one case of this boundary."""
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self.cases += 1
            if elapsed >= self.seconds:
                self.seconds = elapsed
                self.case = repr(case)[:CASE_CHARS]


def report(*boundaries: Slowest) -> None:
    """Print each boundary's slowest case and merge them into the JSON report."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / REPORT_FILE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        doc = {}
    entries = doc.get("boundaries", {}) if isinstance(doc, dict) else {}
    for slowest in boundaries:
        print(
            f"\nfuzz {slowest.boundary}: slowest of {slowest.cases} cases "
            f"{slowest.seconds * 1000:.1f} ms: {slowest.case}"
        )
        entries[slowest.boundary] = asdict(slowest) | {"when": datetime.now(UTC).isoformat()}
    path.write_text(json.dumps({"machine": machine(), "boundaries": entries}, indent=2) + "\n")
