"""What a HIL run produces: cases with verdicts and measurements, grouped by suite."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from hil.wait import TOTAL as WAIT
from hil.wait import summarize


@dataclass
class Measurement:
    """One measured figure of a case, e.g. ``asr_ms`` of turn 3."""

    name: str
    value: float
    unit: str
    stage: str | None = None
    sample: int | None = None


@dataclass
class CaseResult:
    """One named case: pass, fail (with a readable reason) or error, and what it measured."""

    suite: str
    name: str
    verdict: str  # "pass", "fail", "error", "skip"
    duration_s: float
    reason: str = ""
    measurements: list[Measurement] = field(default_factory=list)
    logs: str = ""

    @property
    def passed(self) -> bool:
        """True only for a pass."""
        return self.verdict == "pass"


@dataclass
class RunResult:
    """Everything one ``hil run`` did against one target."""

    target: str
    suites: list[str]
    started: datetime
    finished: datetime
    cases: list[CaseResult]
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every case passed (skips do not fail a run)."""
        return all(c.verdict in ("pass", "skip") for c in self.cases)

    def counts(self) -> dict[str, int]:
        """How many cases ended with each verdict."""
        out = {"pass": 0, "fail": 0, "error": 0, "skip": 0}
        for c in self.cases:
            out[c.verdict] += 1
        return out

    def turn_waits(self) -> list[dict[str, float]]:
        """Per turn (sample): end of speech to first audio, ``wait`` and each stage, in ms."""
        per_sample: dict[int, dict[str, float]] = {}
        for case in self.cases:
            for m in case.measurements:
                if m.sample is None or not m.name.startswith(WAIT):
                    continue
                stage = WAIT if m.stage is None else m.stage
                per_sample.setdefault(m.sample, {})[stage] = m.value
        return [per_sample[s] for s in sorted(per_sample)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the ``results.json`` document)."""
        return {
            "target": self.target,
            "suites": self.suites,
            "started": self.started.isoformat(),
            "finished": self.finished.isoformat(),
            "ok": self.ok,
            "counts": self.counts(),
            "environment": self.environment,
            # End of speech -> first audio over the run's turns: p50/p95 per stage.
            "turn_wait": summarize(self.turn_waits()),
            "cases": [asdict(c) for c in self.cases],
        }
