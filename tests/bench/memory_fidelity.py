"""What memory keeps is what was said: invented content and value kept, per path.

The labelled fidelity set (``tests/home/memory/fidelity_tune.yaml`` and the held-out
``fidelity_held_out.yaml``, each item an utterance in recogniser wording and the words
that carry its value) goes through:

- **live**: the reflex's path with the embedded model (:mod:`home.memory.extract`): the
  keep gate, then each kept utterance's draft. No model is asked.
- **model** (peer): SmolLM2-135M on llama.cpp restating each utterance as one
  "The user's ..." line under a grammar that lets it write any words: the evaluator's
  request before memories were held to what was said (its prompt and grammar are kept
  here, as the peer's definition), at temperature 0.

Per path and half: memories written, the share with a content word in no source
(:func:`home.memory.fidelity.check`), and the share that kept every value word (by stem,
numbers as digits). ``FIDELITY_EXTRA=a.yaml,b.yaml`` adds sets of the same shape (public
data kept outside the repository). ``FIDELITY_MODEL=0`` skips the model peer.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from home.memory.extract import drafted
from home.memory.fidelity import check, content_stems, content_words, stem
from home.memory.keep_gate import KeepGate, load_keep_gate
from tests.bench.report import Result, publish

SETS = Path(__file__).resolve().parents[1] / "home" / "memory"
HALVES = {"tune": SETS / "fidelity_tune.yaml", "held-out": SETS / "fidelity_held_out.yaml"}

# The peer: the evaluator's request with the embedded model before this bench existed.
PEER_SYSTEM = (
    "[memory evaluator] You keep notes about a user. From what the user said, write "
    "down durable facts about the user and their world (names, pets, family, places, "
    "work, preferences, plans), each as one short sentence starting with 'The user's'. "
    "Questions and small talk are not facts."
)
PEER_NAME = "model restates (before #40)"
PEER_MAX_CHARS = 100
PEER_GBNF = f'root ::= "- The user\'s " [^\\n"&]{{3,{PEER_MAX_CHARS}}} "\\n"'


@dataclass(frozen=True)
class Item:
    """One labelled utterance."""

    utterance: str
    value: tuple[str, ...]


def read_set(path: Path) -> list[Item]:
    """A fidelity set file: ``items: [{utterance, value: [words]}]``."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Item(str(i["utterance"]), tuple(str(v) for v in i["value"])) for i in raw["items"]]


def value_kept(memory: str, value: tuple[str, ...]) -> bool:
    """Whether every value word is in the memory (by stem; numbers as digits)."""
    have = content_stems(memory) | {w.lower() for w in memory.split()}
    wanted = content_words(" ".join(value)) or list(value)
    return all(stem(w) in have for w in wanted)


@dataclass
class Tally:
    """One path on one set."""

    items: int = 0
    written: int = 0
    invented: int = 0
    kept_value: int = 0

    def add(self, item: Item, memory: str | None) -> None:
        self.items += 1
        if memory is None:
            return
        self.written += 1
        self.invented += not check(memory, [item.utterance]).faithful
        self.kept_value += value_kept(memory, item.value)


def live(gate: KeepGate, items: list[Item]) -> Tally:
    """The reflex's path with the embedded model: keep gate, then the draft."""
    tally = Tally()
    verdicts = gate.judge([i.utterance for i in items])
    for item, verdict in zip(items, verdicts, strict=True):
        extracted = drafted(item.utterance) if verdict.keep else None
        tally.add(item, None if extracted is None else extracted.memory)
    return tally


async def model_peer(url: str, items: list[Item]) -> Tally:
    """The peer: the embedded model restating each utterance under the free fact grammar."""
    tally = Tally()
    async with httpx.AsyncClient(timeout=120) as http:
        for item in items:
            body = {
                "messages": [
                    {"role": "system", "content": PEER_SYSTEM},
                    {
                        "role": "user",
                        "content": f'The user said: "{item.utterance}"\n\nThe fact worth keeping:',
                    },
                ],
                "grammar": PEER_GBNF,
                "temperature": 0.0,
                "max_tokens": PEER_MAX_CHARS + 16,
            }
            response = await http.post(f"{url}/chat/completions", json=body)
            response.raise_for_status()
            text = str(response.json()["choices"][0]["message"]["content"])
            tally.add(item, text.strip().removeprefix("- ").strip() or None)
    return tally


def _share(n: int, of: int) -> float:
    return 100.0 * n / of if of else 0.0


def results_of(half: str, tally: Tally, peer: Tally | None) -> list[Result]:
    """The live path's rows on one half, each beside the model peer's figure."""
    rows = (
        ("memories written", lambda t: _share(t.written, t.items), tally.items),
        ("invented content", lambda t: _share(t.invented, t.written), tally.written),
        ("value kept", lambda t: _share(t.kept_value, t.written), tally.written),
    )
    return [
        Result(
            metric=f"{metric} [{half}]",
            value=figure(tally),
            unit="%",
            n=n,
            peer=None if peer is None else PEER_NAME,
            peer_value=None if peer is None else figure(peer),
            note=f"live path (keep gate, then the draft); {tally.items} utterances",
        )
        for metric, figure, n in rows
    ]


async def run() -> list[Result]:
    """Measure every half on the live path and (unless switched off) the model peer."""
    halves = {name: read_set(path) for name, path in HALVES.items()}
    for extra in filter(None, os.environ.get("FIDELITY_EXTRA", "").split(",")):
        halves[Path(extra).stem] = read_set(Path(extra))
    gate = await asyncio.to_thread(load_keep_gate)
    tallies = {name: live(gate, items) for name, items in halves.items()}
    peers: dict[str, Tally] = {}
    if os.environ.get("FIDELITY_MODEL", "1") != "0":
        from home.llm.server import LlamaServer, LlamaServerConfig  # noqa: PLC0415

        with tempfile.TemporaryDirectory(prefix="fidelity-") as work:
            async with LlamaServer(LlamaServerConfig(log_path=Path(work) / "llama.log")) as llm:
                for name, items in halves.items():
                    peers[name] = await model_peer(llm.url, items)
    results: list[Result] = []
    for name, tally in tallies.items():
        results += results_of(name, tally, peers.get(name))
    return results


def main() -> None:
    """Run the benchmark, print the table, write bench-results/memory_fidelity.json."""
    publish("memory_fidelity", asyncio.run(run()))
