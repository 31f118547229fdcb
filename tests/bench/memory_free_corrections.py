"""The memory benchmark's free-form corrections (part of ``make bench NAME=memory``).

``tests/bench/data/memory_free_corrections.yaml`` was written by another hand, blind to
the code and before it: 64 corrections said as people say them ("ana moved to lyon last
month" after "my sister ana lives in porto"; "it's tuesdays not mondays"; "she's a pilot
now") and 16 controls (a like-shaped fact about someone else, which must replace nothing),
half held out; ``memory_free_corrections_2.yaml``, by a second blind hand, adds 48
corrections and 12 controls to the tuning half only. Each item runs on a fresh agent
through the path the embedded model's reflex takes: recall on each utterance, the keep
gate (with its rescue of a correction of something recalled), the draft, the deposit;
then the question's recall. Measured per half:

- **stale after correction**: items whose recall shows a memory holding the old value and
  not the new one (goal <= 5 % on the held-out half);
- **current value recalled**: items whose recall shows the new value;
- **controls kept**: controls whose first fact is still recalled.

Peer, in the same run: the same reflex without the knowledge book (no heads: only slots,
revisions and near-duplicates correct). ``BENCH_SHOW_TUNE=1`` prints the tuning half's
misses; the held-out half is only ever counted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from home.memory.config import parse_config
from home.memory.correction import revises_recalled
from home.memory.extract import drafted
from home.memory.fsrs import ReviewBook
from home.memory.keep_gate import KeepGate, load_keep_gate
from home.memory.memories import MemoryStore
from home.memory.reflex import Depositor, Recaller
from tests.bench.report import Result

DATA = Path(__file__).parent / "data" / "memory_free_corrections.yaml"
# A second tuning set by another blind hand (48 corrections, 12 controls, all "tune").
MORE_TUNING = DATA.with_name("memory_free_corrections_2.yaml")
THRESHOLD = 0.3  # the catalog's agent.edge_asr_memory threshold
HALVES = ("tune", "held_out")


@dataclass(frozen=True)
class Item:
    """One correction (or control) as written in the data file."""

    id: str
    split: str
    said: tuple[str, ...]
    correction: str
    question: str
    new: str
    old: str | None
    kind: str

    @property
    def control(self) -> bool:
        """A like-shaped fact about something else, which must correct nothing."""
        return self.old is None


def read_items(path: Path = DATA) -> list[Item]:
    """The data file's items; a malformed one names its index and field."""
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list of items")
    items = []
    for i, entry in enumerate(raw):
        try:
            items.append(
                Item(
                    str(entry["id"]),
                    str(entry["split"]),
                    tuple(str(s) for s in entry["said"]),
                    str(entry["correction"]),
                    str(entry["question"]),
                    str(entry["new"]).lower(),
                    None if entry["old"] is None else str(entry["old"]).lower(),
                    str(entry["kind"]),
                )
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: item {i}: missing or malformed {exc}") from exc
    return items


def _holds(text: str, word: str) -> bool:
    return word in re.findall(r"[a-z0-9']+", text.lower())


@dataclass
class Tally:
    """One arm's counts on one half."""

    corrections: int = 0
    stale: int = 0
    current: int = 0
    controls: int = 0
    controls_kept: int = 0
    misses: list[str] = field(default_factory=list)


async def _say(utterance: str, recaller: Recaller, depositor: Depositor, gate: KeepGate) -> None:
    """One user turn as the draft path takes it: recall, gate (and rescue), deposit."""
    _, shown = await recaller.recall(utterance)
    (verdict,) = gate.judge([utterance])
    recalled = [h.memory.content for h in shown]
    if not (verdict.keep or revises_recalled(utterance, verdict.score, recalled)):
        return
    memory = drafted(utterance)
    if memory is not None and memory.faithful:
        await depositor.deposit([memory])


async def _run_item(
    store: MemoryStore, url: str, work: Path, item: Item, arm: str, gate: KeepGate
) -> tuple[bool, bool]:
    """(the old value came back stale or the control's fact was lost, the new value came back)."""
    agent = f"free_{arm}_{item.id}"
    await store.client.ensure(f"workspace/{agent}")
    await store.client.ensure(f"knowledge/{agent}")
    config = parse_config({
        "agent": agent, "nats_url": "nats://unused", "binding_file": str(work / "binding.json"),
        "jmfts_url": url, "jmfts_token_file": str(work / "admin.token"),
        "roots": [f"workspace/{agent}"], "k": 5, "threshold": THRESHOLD,
        "knowledge_root": f"knowledge/{agent}" if arm == "heads" else None,
    })  # fmt: skip
    reviews = ReviewBook(work / f"reviews-{agent}.json", 3.0)
    recaller, depositor = Recaller(config, store, reviews), Depositor(config, store, reviews)
    for utterance in (*item.said, item.correction):
        await _say(utterance, recaller, depositor, gate)
    _, shown = await recaller.recall(item.question)
    texts = [h.memory.content for h in shown]
    current = any(_holds(t, item.new) for t in texts)
    if item.old is None:
        return not current, current
    old = item.old
    return any(_holds(t, old) and not _holds(t, item.new) for t in texts), current


async def measure_free_corrections(url: str, admin_token: str, work: Path) -> list[Result]:
    """Both arms on every item, on one JMFTS, as the admin principal."""
    (work / "admin.token").write_text(admin_token)
    items = [*read_items(), *read_items(MORE_TUNING)]
    gate = load_keep_gate()
    tallies: dict[tuple[str, str], Tally] = {
        (arm, half): Tally() for arm in ("heads", "peer") for half in HALVES
    }
    async with MemoryStore(url, token=admin_token) as store:
        for item in items:
            for arm in ("heads", "peer"):
                tally = tallies[(arm, item.split)]
                bad, current = await _run_item(store, url, work, item, arm, gate)
                if item.control:
                    tally.controls += 1
                    tally.controls_kept += not bad
                else:
                    tally.corrections += 1
                    tally.stale += bad
                    tally.current += current
                if (bad or not current) and item.split == "tune":
                    tally.misses.append(f"{item.id} ({item.kind}): stale={bad} current={current}")
    if os.environ.get("BENCH_SHOW_TUNE"):
        for miss in tallies[("heads", "tune")].misses:
            print("tune miss:", miss)
    return [row for half in HALVES for row in _rows(half, tallies)]


def _rows(half: str, tallies: dict[tuple[str, str], Tally]) -> list[Result]:
    now, peer = tallies[("heads", half)], tallies[("peer", half)]
    labels: dict[str, Any] = {"half": half.replace("_", "-")}
    name = f"free-form corrections ({half.replace('_', '-')})"
    return [
        Result(
            f"{name}: stale after correction",
            now.stale / max(now.corrections, 1),
            "fraction",
            now.corrections,
            "without heads (slots and revisions only)",
            peer.stale / max(peer.corrections, 1),
            note="goal <= 0.05 on the held-out half",
            labels=labels,
        ),
        Result(
            f"{name}: current value recalled",
            now.current / max(now.corrections, 1),
            "fraction",
            now.corrections,
            "without heads (slots and revisions only)",
            peer.current / max(peer.corrections, 1),
            labels=labels,
        ),
        Result(
            f"{name}: controls still recalled",
            now.controls_kept / max(now.controls, 1),
            "fraction",
            now.controls,
            "without heads (slots and revisions only)",
            peer.controls_kept / max(peer.controls, 1),
            note="goal 1: a like-shaped fact about another replaces nothing",
            labels=labels,
        ),
    ]
