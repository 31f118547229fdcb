"""Threshold calibration from the reflex's own records (pure, except :func:`plot`).

Every search the reflex made is in its ledger with every score, and every turn that
was shown memories says which of them the reply used. Three distributions of the
cosine score the gate compares follow (decay ranks candidates, it does not gate,
:mod:`home.memory.recall`): hits shown and used, shown and not used, and not shown
(below the threshold, or beyond the memories a recall shows). The suggested
threshold is the score that best separates used hits from all others (Youden's
J = TPR - FPR over the observed scores). What the data cannot say:
a hit below the threshold was never shown, so it never had the chance to be used; the
"not shown" distribution shows how close those hits came.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from home.memory.errors import LedgerUnreadable

Category = Literal["used", "shown_unused", "not_shown"]
CATEGORIES: tuple[Category, ...] = ("used", "shown_unused", "not_shown")


@dataclass
class Calibration:
    """Score distributions and the suggestion drawn from them."""

    searches: int
    thresholds: list[float]
    scores: dict[Category, list[float]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    suggested: float | None = None
    separation: float | None = None
    reason: str = ""

    @property
    def current(self) -> float | None:
        """The threshold of the most recent search."""
        return self.thresholds[-1] if self.thresholds else None

    def summary(self) -> dict[str, Any]:
        """JSON-ready: counts and quantiles per category, current and suggested threshold."""
        return {
            "searches": self.searches,
            "current_threshold": self.current,
            "suggested_threshold": self.suggested,
            "separation_j": self.separation,
            "reason": self.reason,
            "categories": {c: describe(self.scores[c]) for c in CATEGORIES},
        }


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted-able ``values`` (linear interpolation)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lo = int(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def describe(values: list[float]) -> dict[str, float | int | None]:
    """n, min, p10, median, p90, max (None when empty)."""
    if not values:
        return {"n": 0, "min": None, "p10": None, "median": None, "p90": None, "max": None}
    return {
        "n": len(values),
        "min": min(values),
        "p10": round(quantile(values, 0.1), 4),
        "median": round(quantile(values, 0.5), 4),
        "p90": round(quantile(values, 0.9), 4),
        "max": max(values),
    }


def best_separation(positives: list[float], negatives: list[float]) -> tuple[float, float]:
    """The threshold (an observed score) maximizing TPR - FPR, and that J.

    Ties go to the lower threshold: a reflex that misses a used memory costs more than
    one that shows an extra line.
    """
    best_t, best_j = min(positives), -1.0
    for t in sorted(set(positives) | set(negatives)):
        tpr = sum(p >= t for p in positives) / len(positives)
        fpr = sum(n >= t for n in negatives) / len(negatives) if negatives else 0.0
        if tpr - fpr > best_j:
            best_t, best_j = t, tpr - fpr
    return best_t, best_j


def collect(records: list[dict[str, Any]]) -> Calibration:
    """Read ledger records (``search`` and ``use``) into a :class:`Calibration`."""
    used: dict[str, set[int]] = {}
    searches = []
    for record in records:
        if record["kind"] == "use":
            used[str(record.get("search_id"))] = {int(i) for i in record.get("used_ids", [])}
        elif record["kind"] == "search":
            searches.append(record)
    calibration = Calibration(
        searches=len(searches), thresholds=[float(s["threshold"]) for s in searches]
    )
    for search in searches:
        used_here = used.get(str(search.get("search_id")), set())
        for hit in search.get("hits", []):
            try:
                # The gate compares the cosine (raw_score); decay only ranks.
                score = float(hit.get("raw_score", hit["score"]))
                passed, doc = bool(hit["passed"]), int(hit["id"])
            except (KeyError, TypeError, ValueError) as exc:
                raise LedgerUnreadable(
                    f"search {search.get('search_id')}: malformed hit {hit!r}"
                ) from exc
            category: Category = (
                "not_shown" if not passed else "used" if doc in used_here else "shown_unused"
            )
            calibration.scores[category].append(score)
    positives = calibration.scores["used"]
    negatives = calibration.scores["shown_unused"] + calibration.scores["not_shown"]
    if not searches:
        calibration.reason = "no searches recorded yet"
    elif not positives:
        calibration.reason = "no shown memory was used yet: keep the threshold, gather more turns"
    else:
        calibration.suggested, calibration.separation = best_separation(positives, negatives)
        calibration.suggested = round(calibration.suggested, 4)
        calibration.separation = round(calibration.separation, 4)
        calibration.reason = (
            f"best separates {len(positives)} used hits from {len(negatives)} others"
        )
    return calibration


def plot(calibration: Calibration, path: Path, agent: str) -> Path:
    """Histograms of the three distributions with the current and suggested thresholds."""
    import matplotlib  # noqa: PLC0415  (imported only when a plot is asked for)

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(8, 4.5))
    bins = [i / 40 for i in range(41)]
    colours = {"used": "tab:green", "shown_unused": "tab:orange", "not_shown": "tab:gray"}
    for category in CATEGORIES:
        values = calibration.scores[category]
        if values:
            axes.hist(
                values, bins=bins, alpha=0.6, color=colours[category],
                label=f"{category.replace('_', ' ')} (n={len(values)})",
            )  # fmt: skip
    if calibration.current is not None:
        axes.axvline(calibration.current, color="black", linestyle="--", label="current threshold")
    if calibration.suggested is not None:
        axes.axvline(calibration.suggested, color="tab:blue", label="suggested threshold")
    axes.set_xlim(0, 1)
    axes.set_xlabel("cosine score (what the gate compares; decay only ranks)")
    axes.set_ylabel("hits")
    axes.set_title(f"memory reflex of {agent}: {calibration.searches} searches")
    axes.legend(loc="upper right")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
