"""Benchmark of the memory reflex's recall: quality on a generated conversation corpus, and
the latency the reflex adds to a turn.

Corpus (deterministic, seeded): sessions of user utterances spread over past weeks, each
stored as one memory with its session's date. Facts are planted across sessions in
conversational wording among small talk; each planted fact gets a paraphrased question
that shares little of its wording, and fabricated questions ask about things never said.

Measured against a real JMFTS server (a subprocess on a free loopback port) through the
reflex's own code path (:class:`home.memory.reflex.Recaller`, HTTP, the agent's token):

- recall@1 and recall@k of the planted fact for the real questions;
- AUC of the top vector score separating real questions from fabricated ones, and the
  gate's true/false positive rates at the shipped threshold;
- the latency the reflex adds to a turn (p50, p99), with JMFTS's own compute time inside
  it as the peer.

Peer for quality: the same questions through ``/search/hybrid`` (rank fusion), whose
scores rank but do not measure: the reason the reflex gates on vector scores.

The keep gate (:mod:`home.memory.keep_gate`), on the labelled acceptance set of
``tests/home/memory/keep_gate_set.yaml``: keep precision, keep recall, and the time to
judge one utterance (embedding included), one at a time as the reflex does; and the
same on this benchmark's own corpus, worded by another hand (every planted statement
to keep; the fillers and all questions to skip), which is not unseen: its fillers showed
the gate keeping today's small talk, and the skip examples were extended for it. Peer:
the embedded evaluator without the gate, which keeps every utterance.

The correction set (:mod:`tests.bench.memory_corrections`, on the same JMFTS): 30 facts, 10
corrections, 20 questions after them; the stale-memory rate among recalled memories and
answer-bearing recall@1, beside the evaluator as it was before corrections (near-duplicates
only). Written by the hand that wrote the slot rule, and one of its wordings ("is with oat
milk") guided it: not unseen.

The free-form corrections (:mod:`tests.bench.memory_free_corrections`, on the same JMFTS):
corrections in any words, written blind, half held out, beside the reflex without its
knowledge book.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from rich.progress import Progress

from hil.wait import percentile
from home.memory.calibrate import best_separation
from home.memory.config import parse_config
from home.memory.fsrs import ReviewBook
from home.memory.keep_gate import load_keep_gate
from home.memory.memories import MemoryStore
from home.memory.reflex import Recaller
from shared.proc import terminate_blocking
from tests.bench.memory_corrections import measure_corrections
from tests.bench.memory_free_corrections import measure_free_corrections
from tests.bench.report import Result, publish
from tests.support.keep_gate_set import LabelledSet, read_labelled_set, score_gate

SEED = 20261130
SESSIONS = 40
FILLERS_PER_SESSION = 6
K = 5
THRESHOLD = 0.3  # the catalog's agent.edge_asr_memory threshold
LATENCY_ROUNDS = 3
AGENT = "bench_mem"
ROOT = f"workspace/{AGENT}"

# (statement in conversation, paraphrased question, values)
FACTS: list[tuple[str, str, list[str]]] = [
    (
        "oh by the way my sister {v} is coming over on Sunday",
        "what's my sister's name again",
        ["Alice", "Priya", "Ingrid", "Maya"],
    ),
    (
        "we finally adopted a dog, we named him {v}",
        "what did we call the new puppy",
        ["Biscuit", "Pepper", "Loki", "Toffee"],
    ),
    (
        "I'm allergic to {v}, so no dessert with that please",
        "is there any food I react badly to",
        ["peanuts", "shellfish", "kiwi", "sesame"],
    ),
    (
        "my car is a {v}, it's getting old",
        "which vehicle do I drive",
        ["red Volvo estate", "blue Fiat Panda", "silver Honda Jazz"],
    ),
    (
        "the wifi password is {v} in case you need it",
        "what is the code for the internet at home",
        ["sunflower42", "bluemoon77", "kettle2024"],
    ),
    (
        "my daughter has started learning the {v}",
        "which instrument is my kid practising",
        ["cello", "violin", "trumpet", "piano"],
    ),
    (
        "my dentist appointment is on {v}",
        "when do I have to see the dentist",
        ["Tuesday at three", "the 14th at nine", "Friday morning"],
    ),
    (
        "my boss is called {v} and she's strict",
        "who is my manager at work",
        ["Helen Brooks", "Dr Sato", "Mrs Adeyemi"],
    ),
    (
        "I work as a {v}",
        "what is my job",
        ["nurse", "bus driver", "software engineer", "carpenter"],
    ),
    (
        "we are flying to {v} for the summer holiday",
        "where are we going on vacation this year",
        ["Crete", "Montreal", "Kyoto", "Lisbon"],
    ),
    (
        "my blood type is {v}",
        "do you know which blood group I have",
        ["O negative", "A positive", "B positive"],
    ),
    (
        "the plumber {v} is coming to fix the boiler",
        "who is repairing the heating",
        ["Dave Ellis", "Marek", "Joe from Quickfix"],
    ),
    (
        "my favourite band is {v}",
        "which group do I like listening to most",
        ["Radiohead", "ABBA", "Khruangbin", "The Cure"],
    ),
    (
        "I'm training for the {v}",
        "what race am I preparing for",
        ["Berlin marathon", "city half marathon", "Ironman in Nice"],
    ),
    (
        "my son's teacher is {v}",
        "who teaches my boy at school",
        ["Mr Patel", "Ms Lindqvist", "Mrs O'Neill"],
    ),
    (
        "our anniversary is on {v}",
        "when do my partner and I celebrate being together",
        ["June 12th", "March 3rd", "October 20th"],
    ),
    (
        "I keep the spare key {v}",
        "where is the extra house key hidden",
        ["under the blue flowerpot", "in the garage drawer", "with the neighbour"],
    ),
    (
        "the cat's vet is {v}",
        "which animal clinic do we take the kitten to",
        ["Greenway Vets", "Dr Hollis", "the clinic on Mill Road"],
    ),
    (
        "I take {v} every morning",
        "what medication am I on",
        ["levothyroxine", "vitamin D", "metformin"],
    ),
    (
        "my gym locker number is {v}",
        "which locker do I use at the fitness club",
        ["214", "87", "1032"],
    ),
    (
        "my mother's birthday is {v}",
        "when was mum born",
        ["the 2nd of May", "August 19th", "December 1st"],
    ),
    (
        "I'm reading {v} at the moment",
        "what book have I got on the go",
        ["Middlemarch", "The Overstory", "Dune"],
    ),
    ("my bank is {v}", "who do I do my banking with", ["Nationwide", "ING", "Monzo"]),
    (
        "the landlord's name is {v}",
        "who owns the flat we rent",
        ["Mr Kowalski", "Sandra Hughes", "Tom Reyes"],
    ),
    (
        "I'm learning {v} on an app",
        "which language am I studying",
        ["Portuguese", "Japanese", "Welsh", "Turkish"],
    ),
    ("my best friend {v} lives in Leeds", "who is my closest mate", ["Jonah", "Fatima", "Ruth"]),
    (
        "I drink my coffee {v}",
        "how do I take my coffee",
        ["black with no sugar", "with oat milk", "as a double espresso"],
    ),
    (
        "my bike lock code is {v}",
        "what combination opens my bicycle lock",
        ["3141", "2718", "1618"],
    ),
    (
        "our neighbour {v} waters the plants when we're away",
        "who looks after our garden when we travel",
        ["Mrs Green", "Oskar", "Ben next door"],
    ),
    (
        "I support {v} in football",
        "which team am I a fan of",
        ["Arsenal", "Celtic", "Ajax", "Sevilla"],
    ),
    (
        "the kids' school is {v}",
        "where do the children go to school",
        ["Hill Park Primary", "St Mary's", "Riverside Academy"],
    ),
    (
        "I'm saving up for a {v}",
        "what am I putting money aside to buy",
        ["new kitchen", "campervan", "piano", "road bike"],
    ),
]

FABRICATED = [
    "what is my brother-in-law's middle name",
    "which tango school did I sign up for",
    "how many goldfish are in the pond",
    "what colour is my grandmother's front door",
    "when does my passport expire",
    "what is the name of my hamster",
    "which hospital was my uncle treated in",
    "what is my niece's favourite cartoon",
    "how much did I pay for the sofa",
    "which chess club do I play for",
    "what did the mechanic say about the tyres",
    "where did I park at the airport",
    "what is my cousin's email address",
    "which pottery class am I enrolled in",
    "what is the PIN of my credit card",
    "who is my landlord's lawyer",
    "what is the name of the yoga teacher",
    "which wine did we order at the wedding",
    "what size are my ski boots",
    "when is the recycling collected",
    "what is my tax reference number",
    "who won the quiz at the pub last week",
    "what is my partner's shoe size",
    "which podcast did my father recommend",
    "how old is the neighbour's tortoise",
    "which room did we book at the hotel in Rome",
    "what's the name of my daughter's imaginary friend",
    "when is my car's MOT due",
    "who fixed the roof last winter",
    "what flavour cake did I order for the party",
    "what is my username on the school portal",
    "which platform does my train leave from",
]

FILLERS = [
    "it's been raining all day again",
    "I had pasta for lunch",
    "can you set a timer for ten minutes",
    "what's the weather like tomorrow",
    "I'm so tired today",
    "the traffic was awful this morning",
    "remind me to call the council",
    "that film last night was boring",
    "play some jazz please",
    "I need to buy milk and bread",
    "the heating is making a noise",
    "tell me a joke",
    "how long do I boil an egg",
    "turn the lights off in the kitchen",
    "I walked about five miles",
    "the kids are finally asleep",
    "what time is it in New York",
    "I can't find my glasses",
    "the garden needs weeding",
    "we should order takeaway tonight",
    "I watched the match on TV",
    "my back hurts a bit",
    "let's listen to the news",
    "how do you spell necessary",
]


@dataclass(frozen=True)
class Planted:
    """A planted fact: the utterance stored, its session's age, and the question about it."""

    utterance: str
    question: str
    days_ago: int


def generate(rng: random.Random) -> tuple[list[tuple[str, int]], list[Planted]]:
    """All stored utterances (text, days ago) and the planted facts among them."""
    facts = list(FACTS)
    rng.shuffle(facts)
    stored: list[tuple[str, int]] = []
    planted: list[Planted] = []
    for session in range(SESSIONS):
        days_ago = (SESSIONS - session) * 3 + rng.randint(0, 2)
        stored += [(f, days_ago) for f in rng.sample(FILLERS, FILLERS_PER_SESSION)]
    for statement, question, values in facts:
        days_ago = rng.randint(1, SESSIONS * 3)
        utterance = statement.format(v=rng.choice(values))
        stored.append((utterance, days_ago))
        planted.append(Planted(utterance, question, days_ago))
    rng.shuffle(stored)
    return stored, planted


def auc(positives: list[float], negatives: list[float]) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


class JmftsProcess:
    """``home jmfts serve`` as a subprocess on a free port (the deployment shape)."""

    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "home.jmfts", "serve", "--data-dir", str(data_dir),
             "--port", "0", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(
                self.process.stdout.readline() if self.process.stdout else ""
            ),
            daemon=True,
        )
        reader.start()
        reader.join(60)
        if not line or not line[0].strip():
            self.stop()
            raise RuntimeError("JMFTS did not start within 60 s")
        info = json.loads(line[0])
        self.url = str(info["url"])
        self.admin_token = Path(info["admin_token_file"]).read_text().strip()

    def stop(self) -> None:
        """Terminate, then kill if it lingers."""
        terminate_blocking(self.process, 15)
        if self.process.stdout is not None:
            self.process.stdout.close()


async def provision(
    url: str, admin_token: str, stored: list[tuple[str, int]]
) -> tuple[str, dict[str, int]]:
    """The agent's principal and token, and every utterance written under its root."""
    now = datetime.now(UTC)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {admin_token}"}, timeout=120
    ) as http:

        async def post(path: str, body: dict[str, Any]) -> Any:
            response = await http.post(path, json=body)
            response.raise_for_status()
            return response.json()

        workspace = await post("/documents", {"title": "workspace", "usetype": "workspace"})
        root = await post("/documents", {"title": AGENT, "parent_id": workspace["id"]})
        ids: dict[str, int] = {}
        batch = [
            {"title": None, "content": text, "parent_id": root["id"],
             "event_time": (now - timedelta(days=days)).isoformat()}
            for text, days in stored
        ]  # fmt: skip
        with Progress(transient=True) as progress:
            task = progress.add_task("writing the corpus into JMFTS", total=len(batch))
            for body in batch:
                doc = await post("/documents", body)
                ids[body["content"]] = int(doc["id"])
                progress.advance(task)
        principal = await post("/access/principals", {"name": AGENT})
        await post(
            f"/access/documents/{root['id']}/grants",
            {"principal_id": principal["id"], "level": "write"},
        )
        token = (await post(f"/access/principals/{principal['id']}/tokens", {"label": "bench"}))[
            "token"
        ]
    return str(token), ids


async def hybrid_top(url: str, token: str, root_id: int, query: str) -> tuple[list[int], float]:
    """The peer: ids and top score of ``/search/hybrid`` (fused ranks)."""
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        response = await http.post(
            "/search/hybrid", json={"query": query, "limit": K, "roots": [root_id]}
        )
        response.raise_for_status()
        results = [r for r in response.json()["results"] if r["id"] != root_id]
    return [int(r["id"]) for r in results], (float(results[0]["score"]) if results else 0.0)


async def server_latency_ms(store: MemoryStore, query: str, root_id: int) -> float:
    """JMFTS's own compute time for the same vector search (its ``latency_ms``)."""
    answer = await store.client.request(  # the reflex's client, one level down: the raw answer
        "POST",
        "/search/vector",
        json={"query": query, "limit": K, "roots": [root_id], "threshold": 0.0},
    )
    return float(answer["latency_ms"])


async def time_reflex(
    recaller: Recaller, store: MemoryStore, questions: list[str], root_id: int
) -> tuple[list[float], list[float]]:
    """Each question through the reflex ``LATENCY_ROUNDS`` times: its latency and the server's."""
    latencies: list[float] = []
    server_ms: list[float] = []
    with Progress(transient=True) as progress:
        task = progress.add_task("timing the reflex", total=LATENCY_ROUNDS * len(questions))
        for _ in range(LATENCY_ROUNDS):
            for question in questions:
                started = time.perf_counter()
                await recaller.recall(question)
                latencies.append((time.perf_counter() - started) * 1000)
                server_ms.append(await server_latency_ms(store, question, root_id))
                progress.advance(task)
    return latencies, server_ms


async def measure(work: Path) -> list[Result]:
    """Build the corpus, run every question through the reflex and the peer."""
    rng = random.Random(SEED)
    stored, planted = generate(rng)
    server = JmftsProcess(work / "jmfts")
    try:
        token, ids = await provision(server.url, server.admin_token, stored)
        (work / "token").write_text(token)
        config = parse_config({
            "agent": AGENT, "nats_url": "nats://unused", "binding_file": str(work / "binding.json"),
            "jmfts_url": server.url, "jmfts_token_file": str(work / "token"),
            "roots": [ROOT], "k": K, "threshold": THRESHOLD,
        })  # fmt: skip
        async with MemoryStore(server.url, token=token) as store:
            recaller = Recaller(config, store, ReviewBook(config.reviews_path, 3.0))
            root_id = await store.resolve(ROOT)
            await recaller.recall("warm up the embedder and the connection")
            top1 = topk = 0
            real_scores: list[float] = []
            fake_scores: list[float] = []
            hybrid_real: list[float] = []
            hybrid_fake: list[float] = []
            hybrid_top1 = hybrid_topk = 0
            gate_tp = gate_fp = 0
            for fact in planted:
                record, shown = await recaller.recall(fact.question)
                ranked = [h.id for h in record.hits]
                target = ids[fact.utterance]
                top1 += ranked[:1] == [target]
                topk += target in ranked[:K]
                real_scores.append(record.hits[0].score if record.hits else 0.0)
                gate_tp += target in [h.memory.id for h in shown]
                h_ids, h_top = await hybrid_top(server.url, token, root_id, fact.question)
                hybrid_top1 += h_ids[:1] == [target]
                hybrid_topk += target in h_ids
                hybrid_real.append(h_top)
            for question in FABRICATED:
                record, shown = await recaller.recall(question)
                fake_scores.append(record.hits[0].score if record.hits else 0.0)
                gate_fp += bool(shown)
                hybrid_fake.append((await hybrid_top(server.url, token, root_id, question))[1])

            questions = [p.question for p in planted] + FABRICATED
            latencies, server_ms = await time_reflex(recaller, store, questions, root_id)
        results = await measure_corrections(server.url, server.admin_token, work)  # same server
        results += await measure_free_corrections(server.url, server.admin_token, work)
    finally:
        server.stop()

    n_real, n_fake = len(planted), len(FABRICATED)
    vector_auc, hybrid_auc = auc(real_scores, fake_scores), auc(hybrid_real, hybrid_fake)
    corpus = f"{len(stored)} memories, {SESSIONS} sessions"
    best_threshold, best_j = best_separation(real_scores, fake_scores)
    return [
        *results,
        Result(
            "recall@1",
            top1 / n_real,
            "fraction",
            n_real,
            "hybrid /search/hybrid",
            hybrid_top1 / n_real,
            note=corpus,
        ),
        Result(
            f"recall@{K}",
            topk / n_real,
            "fraction",
            n_real,
            "hybrid /search/hybrid",
            hybrid_topk / n_real,
        ),
        Result(
            "AUC real vs fabricated (top score)",
            vector_auc,
            "AUC",
            n_real + n_fake,
            "hybrid fused-rank score",
            hybrid_auc,
            note="goal >= 0.9",
        ),
        Result(
            f"gate TPR at {THRESHOLD}",
            gate_tp / n_real,
            "fraction",
            n_real,
            note="planted fact shown",
        ),
        Result(
            f"gate FPR at {THRESHOLD}",
            gate_fp / n_fake,
            "fraction",
            n_fake,
            note="anything shown for a fabricated question",
        ),
        Result(
            "Youden-best threshold on this corpus",
            best_threshold,
            "cosine",
            n_real + n_fake,
            note=f"J = {best_j:.3f} (what home memory calibrate would aim at)",
        ),
        Result(
            "real question top score (median)", statistics.median(real_scores), "cosine", n_real
        ),
        Result(
            "fabricated question top score (median)",
            statistics.median(fake_scores),
            "cosine",
            n_fake,
        ),
        Result(
            "reflex added latency p50",
            percentile(latencies, 50),
            "ms",
            len(latencies),
            "JMFTS compute p50",
            percentile(server_ms, 50),
        ),
        Result(
            "reflex added latency p99",
            percentile(latencies, 99),
            "ms",
            len(latencies),
            "JMFTS compute p99",
            percentile(server_ms, 99),
            note="goal <= 30 ms",
        ),
    ]


def measure_gate() -> list[Result]:
    """The keep gate on the labelled set, beside the evaluator alone (which keeps all)."""
    labelled = read_labelled_set()
    gate = load_keep_gate()
    gate.judge(["warm up the embedder"])
    score = score_gate(gate, labelled)
    n, n_keep = len(labelled), len(labelled.keep)
    corpus = LabelledSet(
        keep=tuple(s.format(v=v) for s, _, values in FACTS for v in values),
        skip=(*FILLERS, *(q for _, q, _ in FACTS), *FABRICATED),
    )
    on_corpus = score_gate(gate, corpus)
    return [
        Result(
            "keep gate precision",
            score.precision,
            "fraction",
            n,
            "evaluator alone (keeps all)",
            n_keep / n,
            note="goal >= 0.9",
        ),
        Result(
            "keep gate recall",
            score.recall,
            "fraction",
            n_keep,
            "evaluator alone (keeps all)",
            1.0,
            note="goal >= 0.8",
        ),
        Result(
            "keep gate time per utterance",
            score.ms_per_utterance,
            "ms",
            n,
            note="MiniLM embedding included, one utterance at a time",
        ),
        Result(
            "keep gate precision, recall corpus",
            on_corpus.precision,
            "fraction",
            len(corpus),
            "evaluator alone (keeps all)",
            len(corpus.keep) / len(corpus),
            note="another hand's wording (it guided the skip examples)",
        ),
        Result(
            "keep gate recall, recall corpus",
            on_corpus.recall,
            "fraction",
            len(corpus.keep),
            "evaluator alone (keeps all)",
            1.0,
        ),
    ]


def main() -> None:
    """Run the benchmark and publish ``bench-results/memory.json``."""
    results = measure_gate()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        results += asyncio.run(measure(Path(tmp)))
    publish("memory", results)


if __name__ == "__main__":
    main()
