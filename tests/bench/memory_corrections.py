"""The memory benchmark's correction set (part of ``make bench NAME=memory``).

Thirty facts are deposited one at a time, as the evaluator deposits them, then ten
corrections of ten of them, worded as the embedded model words them ("The user's dog is
Rex." for "my dog is called Rex now"); then twenty questions are asked through the
reflex's recall (ten about corrected facts, ten about the others). Measured:

- **stale-memory rate**: among the memories recall threads in (at the shipped threshold),
  the fraction that is a corrected fact's old value (goal 0);
- **answer-bearing recall@1**: the fraction of questions whose top hit holds the current
  answer (goal >= 0.9);
- wrong corrections: facts about other things that a deposit replaced (goal 0).

Peer, in the same run: the evaluator as it was before corrections, which replaces a stored
memory only when it is a near-duplicate (cosine >= ``dedup_threshold``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from home.memory.config import parse_config
from home.memory.evaluator import normalized
from home.memory.extract import Extracted
from home.memory.fsrs import ReviewBook
from home.memory.memories import MemoryStore
from home.memory.provenance import Provenance
from home.memory.records import DepositRecord
from home.memory.reflex import DEDUP_NEIGHBOURS, Depositor, Recaller
from tests.bench.report import Result

THRESHOLD = 0.3  # the catalog's agent.edge_asr_memory threshold


@dataclass(frozen=True)
class Fact:
    """One stored fact, its correction (if any), and a question whose answer it holds."""

    fact: str
    question: str
    answer: str
    correction: str | None = None
    corrected_answer: str | None = None


FACTS = [
    Fact("The user's dog is called Biscuit.", "what is my dog called", "Biscuit",
         "The user's dog is Rex.", "Rex"),
    Fact("The user's favourite colour is blue.", "what colour do I like best", "blue",
         "The user's favourite colour is indeed green.", "green"),
    Fact("The user's sister lives in Porto.", "where does my sister live", "Porto",
         "The user's sister moved to Lisbon.", "Lisbon"),
    Fact("The user's car is a red Fiat.", "what car do I drive", "Fiat",
         "The user's car is a blue Volvo now.", "Volvo"),
    Fact("The user's job is teaching maths.", "what do I do for work", "teaching",
         "The user's job is nursing now.", "nursing"),
    Fact("The user's gym day is Monday.", "which day do I go to the gym", "Monday",
         "The user's gym day is Thursday now.", "Thursday"),
    Fact("The user's wife is called Maria.", "what is my wife's name", "Maria",
         "The user's wife is called Marta.", "Marta"),
    Fact("The user's coffee is black.", "how do I take my coffee", "black",
         "The user's coffee is with oat milk now.", "oat"),
    Fact("The user's dentist is Doctor Silva.", "who is my dentist", "Silva",
         "The user's dentist is Doctor Costa.", "Costa"),
    Fact("The user's birthday is in May.", "when is my birthday", "May",
         "The user's birthday is actually in June.", "June"),
    Fact("The user's cat is called Mochi.", "what is my cat's name", "Mochi"),
    Fact("The user's brother lives in Berlin.", "where does my brother live", "Berlin"),
    Fact("The user's favourite food is pasta.", "what food do I love most", "pasta"),
    Fact("The user's daughter is called Ana.", "what is my daughter called", "Ana"),
    Fact("The user's bike is a green Brompton.", "what bike do I have", "Brompton"),
    Fact("The user's mother lives in Seville.", "where does my mum live", "Seville"),
    Fact("The user's allergy is to peanuts.", "what am I allergic to", "peanuts"),
    Fact("The user's football team is Benfica.", "which team do I support", "Benfica"),
    Fact("The user's son plays the violin.", "what instrument does my son play", "violin"),
    Fact("The user's office is in the city centre.", "where is my office", "centre"),
    Fact("The user's favourite band is Radiohead.", "", ""),
    Fact("The user's neighbour is called Tom.", "", ""),
    Fact("The user's anniversary is on the tenth of August.", "", ""),
    Fact("The user's flat has two bedrooms.", "", ""),
    Fact("The user's grandmother is ninety years old.", "", ""),
    Fact("The user's best friend is called Joana.", "", ""),
    Fact("The user's phone is an old Pixel.", "", ""),
    Fact("The user's holiday plan is a trip to Japan in April.", "", ""),
    Fact("The user's piano lessons are on Wednesdays.", "", ""),
    Fact("The user's garden has three apple trees.", "", ""),
]  # fmt: skip


class NearDuplicateDepositor(Depositor):
    """The peer: the evaluator before corrections (identical: kept; cosine >= dedup: replaced)."""

    async def deposit(
        self, memories: list[Extracted], origin: Provenance | None = None
    ) -> list[DepositRecord]:
        root_id = await self.store.resolve(self.config.memory_root)
        for fact in (m.memory for m in memories):
            nearest = await self.store.vector_search(fact, root_id, DEDUP_NEIGHBOURS)
            if any(normalized(m.content) == normalized(fact) for m in nearest):
                continue
            close = nearest and nearest[0].score >= self.config.dedup_threshold
            await self.store.deposit(root_id, fact, supersedes=nearest[0].id if close else None)
        return []


def as_said(fact: str) -> Extracted:
    """A fact as a model would hand it over, said in those very words."""
    return Extracted(fact, "model", (fact,))


@dataclass
class Arm:
    """One way of depositing, measured on the same facts and questions."""

    name: str
    stale_shown: int = 0
    shown: int = 0
    answered_at_1: int = 0
    asked: int = 0
    wrong_replacements: int = 0


async def _current(store: MemoryStore, root_id: int) -> dict[str, int]:
    """The root's current memories (the workspace view), normalized text -> id."""
    view = await store.client.request("GET", f"/workspace/{root_id}")  # the reflex's client, raw
    return {normalized(d["content"] or ""): int(d["id"]) for d in view["current"]}


async def _run_arm(store: MemoryStore, depositor: Depositor, recaller: Recaller) -> Arm:
    arm = Arm(type(depositor).__name__)
    root_id = await store.resolve(depositor.config.memory_root)
    for fact in FACTS:
        await depositor.deposit([as_said(fact.fact)])
    current = await _current(store, root_id)
    arm.wrong_replacements = sum(normalized(f.fact) not in current for f in FACTS)
    stale = {
        current[normalized(f.fact)]
        for f in FACTS
        if f.correction is not None and normalized(f.fact) in current
    }
    for fact in FACTS:
        if fact.correction is not None:
            await depositor.deposit([as_said(fact.correction)])
    for fact in FACTS:
        if not fact.question:
            continue
        _, shown = await recaller.recall(fact.question)
        arm.asked += 1
        arm.shown += len(shown)
        arm.stale_shown += sum(h.memory.id in stale for h in shown)
        answer = (fact.corrected_answer or fact.answer).lower()
        top = await store.vector_search(fact.question, root_id, 1)
        arm.answered_at_1 += bool(top) and answer in top[0].content.lower()
    return arm


async def measure_corrections(url: str, admin_token: str, work: Path) -> list[Result]:
    """Both arms on one JMFTS, each under its own workspace root, as the admin principal."""
    (work / "admin.token").write_text(admin_token)
    arms = []
    async with MemoryStore(url, token=admin_token) as store:
        workspace = await store.resolve("workspace")
        for slug, kind in (("now", Depositor), ("peer", NearDuplicateDepositor)):
            title = f"bench_corrections_{slug}"
            await store.client.request(
                "POST", "/documents", json={"title": title, "parent_id": workspace}
            )
            config = parse_config({
                "agent": "bench_corrections", "nats_url": "nats://unused",
                "binding_file": str(work / "binding.json"), "jmfts_url": url,
                "jmfts_token_file": str(work / "admin.token"),
                "roots": [f"workspace/{title}"], "memory_root": f"workspace/{title}",
                "k": 5, "threshold": THRESHOLD,
            })  # fmt: skip
            reviews = ReviewBook(work / f"reviews-{slug}.json", 3.0)
            recaller = Recaller(config, store, reviews)
            arms.append(await _run_arm(store, kind(config, store, reviews), recaller))
    now, peer = arms
    return [
        Result(
            "correction set: stale memories among recalled",
            now.stale_shown / max(now.shown, 1),
            "fraction",
            now.shown,
            "near-duplicates only (before)",
            peer.stale_shown / max(peer.shown, 1),
            note="goal 0; 30 facts, 10 corrections, 20 questions",
        ),
        Result(
            "correction set: answer-bearing recall@1",
            now.answered_at_1 / now.asked,
            "fraction",
            now.asked,
            "near-duplicates only (before)",
            peer.answered_at_1 / peer.asked,
            note="goal >= 0.9",
        ),
        Result(
            "correction set: facts wrongly replaced before the corrections",
            float(now.wrong_replacements),
            "count",
            len(FACTS),
            "near-duplicates only (before)",
            float(peer.wrong_replacements),
            note="goal 0",
        ),
    ]
