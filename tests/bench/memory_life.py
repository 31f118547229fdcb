"""A household's life with its memory: are its facts still recalled after months?

One household talks to home for about 180 simulated days through the reflex's own path
with the embedded defaults (:mod:`home.memory.reflex` over a real JMFTS, the keep gate,
drafts, the fidelity check, corrections, the review book), one turn at a time as the
catalog's ``agent.edge_asr_memory`` runs it (every turn recalled, then evaluated). The
clock is injected, never slept: recall reckons decay at the simulated time and every
memory is stamped with the time it was said.

The life (``tests/bench/data/memory_life_*.yaml``, written before the ranking it judges
changed): 220 facts about the people, pets, places and routines of one home, said in
varied words from several boards on days 0-80; restatements; 47 corrections; and five
times as many turns of chatter as statements, which should not be kept. The facts come
in halves living in the same home: ``tuning``, the only one looked at while choosing;
``held-out``, read once when #33's first changes were done; and ``held-out-2``, written
after that, for what changed since.

Each fact is asked about at ages 1, 7, 30 and 90 days after it was said (and, once
corrected, after its correction), in other words than it was said in. At each age one
question (in turn) is asked as the household would: when recall shows the current
answer, the answer uses it (a review). Per age and half:

- **recall@1, recall@5**: the first, or any, of the memories recall shows holds the
  current answer (the corrected one after a correction);
- **stale after correction**: of the questions asked after a correction, the share
  where a memory holding the old answer ranks above every one holding the new;
- **unrecallable**: the share of facts that none of their three questions brings back,
  and the same among the facts never corrected (the goal there is none).

Arms, in the same run, each on its own root and, as the catalog's agent has, its own
knowledge book (``knowledge/life_<arm>``): decay on (the catalog's root); decay on with
the slow curator (:mod:`home.memory.curator`) making a pass after each deposit, as the
memorize report wakes ``agent.memory_curator``; decay off;
and the peer (no knowledge book), recall as it was before #33 (cosine times
retrievability gated at the catalog's threshold then, 0.45, among the k found; an unused
recall a lapse; a restatement no review).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import random
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from home.jmfts.testing import running_jmfts
from home.memory import correction as correction_module
from home.memory import recall as recall_module
from home.memory.config import ReflexConfig, parse_config
from home.memory.correction import revises_recalled
from home.memory.curator import Curator, Merge, Watermarks
from home.memory.extract import drafted
from home.memory.fsrs import ReviewBook, stability_after_success
from home.memory.keep_gate import KeepGate, load_keep_gate
from home.memory.memories import MemoryStore, StoredMemory
from home.memory.recall import ScoredHit
from home.memory.records import DepositRecord
from home.memory.reflex import Depositor, Recaller
from tests.bench.memory_fidelity import value_kept
from tests.bench.report import Result, publish, quantile

DATA = Path(__file__).parent / "data"
HALVES = {
    "tuning": DATA / "memory_life_tune.yaml",
    "held-out": DATA / "memory_life_held_out.yaml",
    # Written after "held-out" was read once (#33): the untouched half for what changed since.
    "held-out-2": DATA / "memory_life_held_out_2.yaml",
}
CHATTER = DATA / "memory_life_chatter.yaml"
AGES = (1, 7, 30, 90)
CHATTER_PER_STATEMENT = 5
# The catalog's agent.edge_asr_memory (schemas/nodes.yaml): threshold, k, decay.
THRESHOLD, K, INITIAL_STABILITY_DAYS = 0.3, 5, 3.0
PEER_THRESHOLD = 0.45  # the catalog's before #33
SEED = 33


@dataclass(frozen=True)
class Said:
    """One utterance on one day from one board, and the words that carry its value."""

    day: int
    device: str
    text: str
    answer: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fact:
    """One fact of the household: said, perhaps restated, perhaps corrected, and asked."""

    id: str
    half: str
    stated: Said
    questions: tuple[str, ...]
    restatements: tuple[Said, ...] = ()
    correction: Said | None = None


def _said(raw: dict[str, object], answer: object = ()) -> Said:
    words = tuple(str(w).lower() for w in answer or ())  # type: ignore[attr-defined]
    day = int(raw["day"])  # type: ignore[call-overload]
    return Said(day, str(raw["device"]), str(raw["said"]), words)


def read_half(path: Path) -> list[Fact]:
    """One half of the life's facts (the schema is the files' own, see the module doc)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    facts = []
    for item in raw["facts"]:
        fix = item.get("correction")
        facts.append(
            Fact(
                id=str(item["id"]),
                half=str(raw["half"]),
                stated=_said(item, item["answer"]),
                questions=tuple(str(q) for q in item["questions"]),
                restatements=tuple(
                    _said(r, item["answer"]) for r in item.get("restatements") or []
                ),
                correction=None if fix is None else _said(fix, fix["answer"]),
            )
        )
    return facts


def read_chatter(path: Path = CHATTER) -> list[str]:
    """The chatter: things said that hold nothing worth keeping."""
    return [str(line) for line in yaml.safe_load(path.read_text(encoding="utf-8"))["chatter"]]


@dataclass(frozen=True)
class Turn:
    """One utterance at a time of the life (in days since it began)."""

    at: float
    device: str
    text: str
    chatter: bool = False


@dataclass(frozen=True)
class Probe:
    """Questions about one fact at one age: what answers now, and what answered before."""

    at: float
    fact: Fact
    age: int
    current: tuple[str, ...]
    stale: tuple[str, ...] | None  # the corrected value, once a correction was said


def _time_of_day(rng: random.Random) -> float:
    return rng.uniform(7 / 24, 22 / 24)


def schedule(
    facts: list[Fact], chatter: list[str], seed: int = SEED, ages: Iterable[int] = AGES
) -> tuple[list[Turn], list[Probe]]:
    """Every turn of the life and every probe, each in time order (deterministic)."""
    rng = random.Random(seed)
    turns: list[Turn] = []
    probes: list[Probe] = []
    devices: list[str] = []
    for fact in facts:
        saids = [fact.stated, *fact.restatements]
        if fact.correction is not None:
            saids.append(fact.correction)
        for said in saids:
            turns.append(Turn(said.day + _time_of_day(rng), said.device, said.text))
            devices.append(said.device)
        starts = [fact.stated.day]
        if fact.correction is not None:
            starts.append(fact.correction.day)
        for start in starts:
            for age in ages:
                at = start + age + _time_of_day(rng)
                corrected = fact.correction is not None and fact.correction.day < at
                probes.append(
                    Probe(
                        at,
                        fact,
                        age,
                        fact.correction.answer if corrected else fact.stated.answer,  # type: ignore[union-attr]
                        fact.stated.answer if corrected else None,
                    )
                )
    last_day = int(max(t.at for t in turns)) + 1
    lines = itertools.cycle(rng.sample(chatter, len(chatter)))
    for _ in range(CHATTER_PER_STATEMENT * len(turns)):
        turns.append(Turn(rng.uniform(0, last_day), rng.choice(devices), next(lines), True))
    return sorted(turns, key=lambda t: t.at), sorted(probes, key=lambda p: p.at)


class SimClock:
    """The life's time: days since it began, mapped to aware datetimes ending before now."""

    def __init__(self, days: float) -> None:
        self.origin = datetime.now(UTC) - timedelta(days=days + 1)
        self.day = 0.0

    def __call__(self) -> datetime:
        return self.origin + timedelta(days=self.day)


class PeerRecaller(Recaller):
    """Recall before #33: a hit passes when cosine x R reaches the threshold, among the k
    it searched; a memory shown and not used is a lapse that halves its stability."""

    async def recall(
        self, query: str, *, binding_id: str | None = None
    ) -> tuple[object, list[ScoredHit]]:
        root = self.config.roots[0]
        root_id = await self.store.resolve(root.path)
        hits = await self.store.vector_search(query, root_id, self.config.k)
        now = self.clock()
        scored = []
        for memory in hits:
            r = self.reviews.retrievability(memory.id, memory.written_at, now)
            score = memory.score * r
            scored.append(ScoredHit(memory, root.path, r, score, score >= self.config.threshold))
        scored.sort(key=lambda h: -h.score)
        return None, [h for h in scored if h.passed]

    def review(self, shown: list[ScoredHit], used_ids: set[int]) -> None:
        now = self.clock()
        for hit in shown:
            state = self.reviews.state(hit.memory.id, hit.memory.written_at)
            if hit.memory.id in used_ids:
                state.stability_days = stability_after_success(
                    state.stability_days, state.retrievability_at(now)
                )
            else:
                state.stability_days = max(state.stability_days / 2.0, 0.1)
            state.last_review = now.isoformat()
            self.reviews._states[hit.memory.id] = state  # the peer's own book


@dataclass
class Tally:
    """One arm's figures, per (half, age)."""

    asked: dict[tuple[str, int], int] = field(default_factory=dict)
    at_1: dict[tuple[str, int], int] = field(default_factory=dict)
    at_5: dict[tuple[str, int], int] = field(default_factory=dict)
    lost: dict[tuple[str, int], int] = field(default_factory=dict)
    # Of the facts never corrected: the acceptance line is that none is lost.
    uncorrected: dict[tuple[str, int], int] = field(default_factory=dict)
    uncorrected_lost: dict[tuple[str, int], int] = field(default_factory=dict)
    stale_asked: dict[tuple[str, int], int] = field(default_factory=dict)
    stale: dict[tuple[str, int], int] = field(default_factory=dict)
    latency_ms: list[float] = field(default_factory=list)
    kept: int = 0
    chatter_kept: int = 0
    chatter_turns: int = 0
    chatter_shown: int = 0  # chatter turns recall showed a memory on
    curated: int = 0  # the curator's merges and resolutions

    def add(self, table: dict[tuple[str, int], int], key: tuple[str, int], n: int = 1) -> None:
        table[key] = table.get(key, 0) + n


def _bears(memory: StoredMemory, words: tuple[str, ...]) -> bool:
    return value_kept(memory.content, words)


def _stale(shown: list[ScoredHit], probe: Probe) -> bool:
    """Whether a memory with the old value ranks above every one with the current."""
    assert probe.stale is not None
    for hit in shown:
        if _bears(hit.memory, probe.current):
            return False
        if _bears(hit.memory, probe.stale):
            return True
    return False


@dataclass
class Arm:
    """One way of recalling, living the whole life on its own root."""

    name: str
    recaller: Recaller
    depositor: Depositor
    tally: Tally = field(default_factory=Tally)
    written: dict[int, str] = field(default_factory=dict)  # memory id -> its text
    # The curator's pass, woken by each deposit as its node is by a memorize report.
    curate: Callable[[], Awaitable[list[Merge]]] | None = None


async def live(
    arm: Arm, gate: KeepGate, turns: list[Turn], probes: list[Probe], clock: SimClock
) -> None:
    """Run the life: each turn recalled then evaluated, each probe asked at its time."""
    events: list[tuple[float, int, Turn | Probe]] = [(t.at, 0, t) for t in turns]
    events += [(p.at, 1, p) for p in probes]
    events.sort(key=lambda e: (e[0], e[1]))
    asked_turns = 0
    for at, _, event in events:
        clock.day = at
        if isinstance(event, Turn):
            record, shown = await arm.recaller.recall(event.text)
            arm.tally.chatter_turns += event.chatter
            arm.tally.chatter_shown += event.chatter and bool(shown)
            if record is not None:
                arm.tally.latency_ms.append(record.latency_ms)  # type: ignore[attr-defined]
            (verdict,) = await asyncio.to_thread(gate.judge, [event.text])
            recalled = [h.memory.content for h in shown]
            keep = verdict.keep or revises_recalled(event.text, verdict.score, recalled)
            extracted = drafted(event.text) if keep else None
            if extracted is not None and extracted.faithful:
                records = await arm.depositor.deposit([extracted])
                _note_replacements(arm, records, event)
                if arm.curate is not None:
                    arm.tally.curated += len(await arm.curate())
                arm.tally.kept += 1
                arm.tally.chatter_kept += event.chatter
            continue
        await ask(arm, event, asked_turns)
        asked_turns += 1


def _note_replacements(arm: Arm, records: list[DepositRecord], turn: Turn) -> None:
    """With ``LIFE_DEPOSITS=FILE``: each memory a deposit replaced, and by what (YAML)."""
    for record in records:
        arm.written[record.id] = record.fact
        if record.supersedes is not None:
            _append("LIFE_DEPOSITS", {
                "arm": arm.name, "day": round(turn.at, 1), "chatter": turn.chatter,
                "action": record.action, "by": record.fact, "knowledge": record.knowledge,
                "replaced": arm.written.get(record.supersedes, record.supersedes),
            })  # fmt: skip


def _append(variable: str, row: dict[str, object]) -> None:
    """Append ``row`` to the YAML file the environment ``variable`` names, if it names one."""
    if path := os.environ.get(variable):
        with open(path, "a", encoding="utf-8") as out:
            out.write(yaml.safe_dump([row], sort_keys=False, allow_unicode=True))


async def ask(arm: Arm, probe: Probe, turn: int) -> None:
    """One probe: the household's question (reviewed when answered), then the other two
    read-only, to tell whether the fact can be brought back at all."""
    key = (probe.fact.half, probe.age)
    tally = arm.tally
    questions = probe.fact.questions
    first = questions[(AGES.index(probe.age)) % len(questions)]
    _, threaded = await arm.recaller.recall(first)
    shown = sorted(threaded, key=lambda h: -h.score)  # by rank, not in the order shown
    bearing = [h for h in shown if _bears(h.memory, probe.current)]
    tally.add(tally.asked, key)
    tally.add(tally.at_1, key, int(bool(shown) and _bears(shown[0].memory, probe.current)))
    tally.add(tally.at_5, key, int(bool(bearing)))
    if probe.stale is not None:
        tally.add(tally.stale_asked, key)
        tally.add(tally.stale, key, int(_stale(shown, probe)))
    arm.recaller.review(shown, {bearing[0].memory.id} if bearing else set())
    found = bool(bearing)
    for question in questions:
        if found or question == first:
            continue
        _, others = await arm.recaller.recall(question)
        found = any(_bears(h.memory, probe.current) for h in others)
    tally.add(tally.lost, key, int(not found))
    if not bearing:
        _append("LIFE_MISSES", {
            "arm": arm.name, "fact": probe.fact.id, "half": probe.fact.half, "age": probe.age,
            "asked": first, "current": list(probe.current), "found by another question": found,
            "shown": [f"{h.score:.2f} #{h.memory.id} {h.memory.content}" for h in shown],
        })  # fmt: skip
    if probe.fact.correction is None:
        tally.add(tally.uncorrected, key)
        tally.add(tally.uncorrected_lost, key, int(not found))


def _config(
    work: Path, url: str, root: str, knowledge: str | None, decay: bool, threshold: float
) -> ReflexConfig:
    return parse_config({
        "agent": "life", "nats_url": "nats://unused", "binding_file": str(work / "b.json"),
        "jmfts_url": url, "jmfts_token_file": str(work / "admin.token"),
        "roots": [{"path": root, "decay": decay}], "memory_root": root,
        "knowledge_root": knowledge, "k": K, "threshold": threshold,
        "initial_stability_days": INITIAL_STABILITY_DAYS,
    })  # fmt: skip


async def run_life(
    facts: list[Fact],
    chatter: list[str],
    arms: Iterable[str],
    work: Path,
    ages: tuple[int, ...] = AGES,
) -> dict[str, Tally]:
    """Live the life once per arm (``on``, ``off``, ``peer``) on one JMFTS; their tallies."""
    turns, probes = schedule(facts, chatter, ages=ages)
    gate = await asyncio.to_thread(load_keep_gate)
    tallies = {}
    async with running_jmfts(work / "jmfts") as jmfts:
        (work / "admin.token").write_text(jmfts.admin_token)
        async with MemoryStore(jmfts.url, token=jmfts.admin_token) as store:
            for name in arms:
                root = f"workspace/life_{name}"
                await jmfts.ensure_path(root)
                threshold = float(os.environ.get("LIFE_THRESHOLD", THRESHOLD))
                # The catalog's knowledge book, one per arm; the peer had none.
                knowledge = None if name == "peer" else f"knowledge/life_{name}"
                if os.environ.get("LIFE_KNOWLEDGE") == "off":
                    knowledge = None
                if knowledge is not None:
                    await jmfts.ensure_path(knowledge)
                if name == "peer":
                    threshold = PEER_THRESHOLD
                config = _config(work, jmfts.url, root, knowledge, name != "off", threshold)
                book = ReviewBook(work / f"reviews-{name}.json", INITIAL_STABILITY_DAYS)
                clock = SimClock(max(p.at for p in probes))
                if name == "peer":  # a restatement's review goes to a book recall never reads
                    unread = ReviewBook(work / "restated-peer.json", INITIAL_STABILITY_DAYS)
                    arm = Arm(
                        name,
                        PeerRecaller(config, store, book, clock),
                        Depositor(config, store, unread, clock),
                    )
                else:
                    arm = Arm(
                        name,
                        Recaller(config, store, book, clock),
                        Depositor(config, store, book, clock),
                    )
                if name == "curated":
                    curator = Curator(store, "agent.memory_curator", Watermarks(work / "c.json"))
                    arm.curate = functools.partial(curator.curate, root, f"life_{name}")
                await live(arm, gate, turns, probes, clock)
                tallies[name] = arm.tally
    return tallies


ARM_NAMES = {
    "on": "decay on",
    "curated": "decay on, curated",
    "off": "decay off",
    "peer": "recall before #33",
}


METRICS = (
    "recall@1",
    "recall@5",
    "unrecallable",
    "unrecallable, never corrected",
    "stale after correction",
)


def fraction(tally: Tally, metric: str, key: tuple[str, int]) -> tuple[float, int]:
    """One figure of one arm at one (half, age), and how many it was measured on."""
    num, den = {
        "recall@1": (tally.at_1, tally.asked),
        "recall@5": (tally.at_5, tally.asked),
        "unrecallable": (tally.lost, tally.asked),
        "unrecallable, never corrected": (tally.uncorrected_lost, tally.uncorrected),
        "stale after correction": (tally.stale, tally.stale_asked),
    }[metric]
    n = den.get(key, 0)
    return (num.get(key, 0) / n if n else 0.0), n


def results_of(tallies: dict[str, Tally], halves: Iterable[str]) -> list[Result]:
    """One row per (arm, half, age, metric), beside the peer's figure; then latency."""
    results = []
    peer = tallies.get("peer")
    for name, tally in tallies.items():
        if name == "peer":
            continue
        for half, age, metric in itertools.product(halves, AGES, METRICS):
            value, n = fraction(tally, metric, (half, age))
            labels: dict[str, str | float] = {
                "age_days": age, "metric": metric, "half": half, "arm": ARM_NAMES[name]
            }  # fmt: skip
            results.append(
                Result(
                    f"{metric} at {age} d [{half}, {ARM_NAMES[name]}]",
                    value,
                    "fraction",
                    n,
                    None if peer is None else ARM_NAMES["peer"],
                    None if peer is None else fraction(peer, metric, (half, age))[0],
                    note="n: questions" if metric.startswith(("recall", "stale")) else "n: facts",
                    labels=labels,
                )
            )
        results.append(
            Result(
                f"recall latency p99 [{ARM_NAMES[name]}]",
                quantile(tally.latency_ms, 0.99),
                "ms",
                len(tally.latency_ms),
                note=f"p50 {quantile(tally.latency_ms, 0.5):.1f} ms; the reflex's own record",
                labels={"metric": "recall latency p99", "arm": ARM_NAMES[name]},
            )
        )
        results.append(
            Result(
                f"chatter turns shown a memory [{ARM_NAMES[name]}]",
                tally.chatter_shown / max(tally.chatter_turns, 1),
                "fraction",
                tally.chatter_turns,
                note="what a lower gate costs: memories put before small talk",
                labels={"metric": "chatter shown a memory", "arm": ARM_NAMES[name]},
            )
        )
        results.append(
            Result(
                f"chatter turns kept [{ARM_NAMES[name]}]",
                float(tally.chatter_kept),
                "count",
                tally.kept,
                note="n: all memories kept",
                labels={"metric": "chatter kept", "arm": ARM_NAMES[name]},
            )
        )
        if name == "curated":
            results.append(
                Result(
                    f"curator merges and resolutions [{ARM_NAMES[name]}]",
                    float(tally.curated),
                    "count",
                    tally.kept,
                    note="n: all memories kept",
                    labels={"metric": "curated", "arm": ARM_NAMES[name]},
                )
            )
    return results


def life_facts(halves: Iterable[str] = HALVES) -> list[Fact]:
    """The facts of the named halves."""
    return [fact for half in halves for fact in read_half(HALVES[half])]


def main() -> None:
    """Live the life, print the table, write bench-results/memory_life.json.

    ``LIFE_HALVES=tuning`` reports the tuning half alone (both halves always live);
    ``LIFE_ARMS=on,off`` leaves the peer out; ``LIFE_THRESHOLD`` and ``LIFE_RANK_FLOOR``
    try another gate threshold or rank floor than the shipped ones;
    ``LIFE_REVISION_SHARERS`` tries another bound on the candidates that may share the
    word linking a revision at recall (0 links far fewer); ``LIFE_KNOWLEDGE=off`` lives it
    without the knowledge book; ``LIFE_MISSES=FILE`` appends each question recall missed,
    with what it showed, and ``LIFE_DEPOSITS=FILE`` each memory a deposit replaced (YAML)."""
    if "LIFE_REVISION_SHARERS" in os.environ:
        correction_module.REVISION_LINK_MAX_SHARERS = int(os.environ["LIFE_REVISION_SHARERS"])
    if "LIFE_RANK_FLOOR" in os.environ:
        recall_module.RANK_FLOOR = float(os.environ["LIFE_RANK_FLOOR"])
    halves = os.environ.get("LIFE_HALVES", ",".join(HALVES)).split(",")
    arms = os.environ.get("LIFE_ARMS", "on,curated,off,peer").split(",")
    with tempfile.TemporaryDirectory(prefix="memory-life-") as work:
        tallies = asyncio.run(run_life(life_facts(), read_chatter(), arms, Path(work)))
    publish("memory_life", results_of(tallies, halves))
