"""Finding the turn that holds the answer in real multi-session conversations: recall@1,
@5 and @10 of the evidence turns of LoCoMo's questions, for a plain BM25 baseline and
JMFTS's vector, full-text and hybrid search, on a tuning and a held-out split.

LoCoMo (10 conversations between two people, 19–32 sessions each) is not ours to
commit; the bench reads it from ``LOCOMO_DIR`` and says how to obtain it when absent.
The files sorted by name, the first five are the tuning split and the last five the
held-out split: search parameters are chosen on tuning numbers only
(``--split tuning``, or ``MEMORY_RETRIEVAL_SPLIT=tuning``), held-out is for reporting.

Each conversation is stored as τ stores what is said to an agent
(``tau_jmfts.store``): per session a ``tau:conversation`` root, each turn a
``tau:message`` document titled ``<role> — <seq>`` holding the words alone, filed
under the turn before it, all in order under one host document per conversation. The
first speaker is the ``user``, the other the ``assistant``; no speaker's name is
stored, because τ stores none. Searches are scoped to the conversation's host
(``roots``) and called as the server calls them. A question counts as found at k when
any of its evidence turns is among the first k results. Adversarial questions
(category 5) and questions without evidence are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss

from home.jmfts.access import Principal
from home.jmfts.config import JmftsConfig
from home.jmfts.embedder import OnnxMiniLM
from home.jmfts.models import DocumentCreate, HybridSearchRequest, SearchRequest
from home.jmfts.rows import embed_text
from home.jmfts.search import search
from home.jmfts.store import DocumentStore
from tests.bench.jmfts_conversation import PlainBM25
from tests.bench.report import Result, publish, quantile

ADMIN = Principal(id=1, name="admin", is_owner=True)
DEFAULT_LOCOMO_DIR = "/tmp/locomo/data/multimodal_dialog/locomo10_v2"
HOW_TO_OBTAIN = (
    "LoCoMo is not in this repository (its license forbids redistribution). Download\n"
    "data/locomo10.zip from https://github.com/snap-research/locomo, unzip it and point\n"
    "LOCOMO_DIR at the folder holding the ten conversation files (*.json), e.g.\n"
    f"  LOCOMO_DIR={DEFAULT_LOCOMO_DIR} make bench NAME=memory_retrieval"
)
SPLITS = ("tuning", "held-out")
KS = (1, 5, 10)
ADVERSARIAL = 5
#: Roles of the two speakers, as τ titles its messages.
ROLES = ("user", "assistant")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


class LocomoMissing(Exception):
    """The LoCoMo files are not where the bench looks for them."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    speakers: tuple[str, str]
    sessions: list[list[Turn]]
    questions: list[Question]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session]


def dia_ids(evidence: str) -> list[str]:
    """LoCoMo's evidence field normalised (``"D8:6; D9:17"``, ``"D30:05"``, ``"D:11:26"``)."""
    return [f"D{int(s)}:{int(t)}" for s, t in _DIA_ID.findall(evidence)]


def load_conversation(path: Path) -> Conversation:
    """One LoCoMo file: its sessions in order and its answerable, non-adversarial questions."""
    raw = json.loads(path.read_text())
    numbers = sorted(
        int(m.group(1))
        for key, value in raw.items()
        if (m := _SESSION.fullmatch(key)) and isinstance(value, list)
    )
    sessions = [
        [Turn(t["dia_id"], t["speaker"], t["text"]) for t in raw[f"session_{n}"]] for n in numbers
    ]
    known = {turn.dia_id for session in sessions for turn in session}
    questions = []
    for qa in raw["qa"]:
        category = int(qa.get("category", 0))
        evidence = frozenset(d for e in qa.get("evidence", []) for d in dia_ids(e)) & known
        if category != ADVERSARIAL and evidence:
            questions.append(Question(str(qa["question"]), evidence, category))
    return Conversation(path.stem, (raw["speaker_a"], raw["speaker_b"]), sessions, questions)


def load_splits(folder: Path) -> dict[str, list[Conversation]]:
    """The ten conversations sorted by file name: the first five tune, the last five report."""
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if len(files) != 10:
        raise LocomoMissing(
            f"{folder}: expected the 10 LoCoMo conversation files, found {len(files)}"
        )
    conversations = [load_conversation(f) for f in files]
    return {"tuning": conversations[:5], "held-out": conversations[5:]}


def stored_turns(conversation: Conversation) -> list[tuple[str, str]]:
    """Title and content of every turn as τ stores it: ``user — 0007``, the words said."""
    role = dict(zip(conversation.speakers, ROLES, strict=True))
    return [
        (f"{role.get(turn.speaker, ROLES[0])} — {seq:04d}", turn.text)
        for session in conversation.sessions
        for seq, turn in enumerate(session, start=1)
    ]


def ingest(store: DocumentStore, conversation: Conversation) -> tuple[int, dict[str, int]]:
    """Store a conversation the way τ does; its host id and the document id of each turn."""
    host = store.create(ADMIN, DocumentCreate(title=f"locomo {conversation.name}")).id
    requests: list[tuple[str | None, str | None]] = list(stored_turns(conversation))
    # Embedded in one batch beforehand, as the write path would one by one: same vectors.
    embedded = iter(store.embed_many(requests))
    written = iter(requests)
    ids: dict[str, int] = {}
    for number, session in enumerate(conversation.sessions, start=1):
        previous = store.create(
            ADMIN,
            DocumentCreate(
                parent_id=host,
                title=f"tau:conversation {conversation.name}-{number:02d}",
                usetype="tau:conversation",
                sequential=False,
            ),
        ).id
        for turn in session:
            title, text = next(written)
            request = DocumentCreate(
                parent_id=previous,
                title=title,
                content=text,
                usetype="tau:message",
                sequential=True,
            )
            previous = store.create_many(ADMIN, [request], embedded=[next(embedded)])[0].id
            ids[turn.dia_id] = previous
    return host, ids


Ranker = Callable[[str], list[int]]


@dataclass
class SplitResult:
    """Per mode, how many questions were found at each k; hybrid's latencies."""

    questions: int
    found: dict[str, dict[int, int]]
    hybrid_ms: list[float]


def measure_split(embedder: OnnxMiniLM, conversations: Sequence[Conversation]) -> SplitResult:
    """Each conversation in a store of its own (a user's memory), every mode on each
    question; hybrid timed around the call the server makes."""
    found: dict[str, dict[int, int]] = {}
    latencies: list[float] = []
    for conversation in conversations:
        with tempfile.TemporaryDirectory(prefix="memory-retrieval-") as tmp:
            store = DocumentStore(Path(tmp) / "data", embedder, synchronous="NORMAL")
            try:
                _measure_conversation(store, conversation, found, latencies)
            finally:
                store.close()
    total = sum(len(c.questions) for c in conversations)
    return SplitResult(total, found, latencies)


def _measure_conversation(
    store: DocumentStore,
    conversation: Conversation,
    found: dict[str, dict[int, int]],
    latencies: list[float],
) -> None:
    host, ids = ingest(store, conversation)
    order = [ids[t.dia_id] for t in conversation.turns]
    bm25 = PlainBM25([embed_text(title, text) for title, text in stored_turns(conversation)])

    def api(method: str) -> Ranker:
        def run(query: str) -> list[int]:
            model = HybridSearchRequest if method == "hybrid" else SearchRequest
            request = model(query=query, limit=max(KS), roots=[host])
            started = time.perf_counter()
            results = search(store, ADMIN, method, request).results
            if method == "hybrid":
                latencies.append((time.perf_counter() - started) * 1000)
            return [r.id for r in results]

        return run

    modes: dict[str, Ranker] = {
        "plain BM25": lambda q: [order[i] for i in bm25.top(q, max(KS))],
        "vector": api("vector"),
        "fulltext": api("fulltext"),
        "hybrid": api("hybrid"),
    }
    for question in conversation.questions:
        evidence = {ids[d] for d in question.evidence}
        for mode, rank in modes.items():
            ranked = rank(question.text)
            counts = found.setdefault(mode, dict.fromkeys(KS, 0))
            for k in KS:
                counts[k] += bool(evidence & set(ranked[:k]))


def results_for(split: str, outcome: SplitResult, turns: int) -> list[Result]:
    results = []
    baseline = outcome.found["plain BM25"]
    for mode, counts in outcome.found.items():
        for k in KS:
            results.append(
                Result(
                    f"recall@{k} | {mode} | {split}",
                    counts[k] / outcome.questions,
                    "ratio",
                    outcome.questions,
                    "plain BM25",
                    baseline[k] / outcome.questions,
                    note=f"{turns} turns",
                    labels={"mode": mode, "metric": f"recall@{k}", "split": split},
                )
            )
    if split == "held-out":
        for q in (0.5, 0.99):
            results.append(
                Result(
                    f"hybrid latency p{round(q * 100)} | hybrid | {split}",
                    quantile(outcome.hybrid_ms, q),
                    "ms",
                    len(outcome.hybrid_ms),
                    note=f"search() with limit {max(KS)}, one conversation's subtree",
                    labels={
                        "mode": "hybrid",
                        "metric": f"latency p{round(q * 100)}",
                        "split": split,
                    },
                )
            )
    return results


def _splits_wanted(argv: Sequence[str]) -> list[str]:
    """``--split`` from the command line, else ``MEMORY_RETRIEVAL_SPLIT``, else both."""
    parser = argparse.ArgumentParser(prog="memory_retrieval")
    parser.add_argument(
        "--split",
        choices=[*SPLITS, "all"],
        default=os.environ.get("MEMORY_RETRIEVAL_SPLIT", "all"),
        help="which split to measure (tuning while tuning; held-out only to report)",
    )
    chosen = parser.parse_args(argv).split
    return list(SPLITS) if chosen == "all" else [chosen]


def main(argv: Sequence[str] = ()) -> None:
    """Measure the splits asked for and publish ``bench-results/memory_retrieval.json``
    (``memory_retrieval_tuning.json`` for one split); without LoCoMo, say how to get it
    and fail."""
    wanted = _splits_wanted(argv)
    folder = Path(os.environ.get("LOCOMO_DIR", DEFAULT_LOCOMO_DIR))
    try:
        splits = load_splits(folder)
    except LocomoMissing as exc:
        print(f"{exc}\n{HOW_TO_OBTAIN}", file=sys.stderr)
        raise
    faiss.omp_set_num_threads(JmftsConfig(data_dir=Path()).faiss_threads)  # as the server runs
    embedder = OnnxMiniLM(batch_size=128)
    results: list[Result] = []
    for split in wanted:
        outcome = measure_split(embedder, splits[split])
        turns = sum(len(c.turns) for c in splits[split])
        results += results_for(split, outcome, turns)
    name = "memory_retrieval" if len(wanted) == len(SPLITS) else f"memory_retrieval_{wanted[0]}"
    publish(name, results)


if __name__ == "__main__":
    main(sys.argv[1:])
