"""The intent step: how well it tells the verbs from conversation, and what it adds to a turn.

On every held-out half (tests/support/intent_set.py, utterances the step also trains on
left out), the shipped step against the same classifier fitted without its cue columns
(peer: what the words add): macro precision, the worst verb's recall, accuracy. Then
the time one utterance takes to judge, as a turn judges it (p50, p99 over every held-out
utterance once), against the keep gate judging the same utterance: the step that already
runs on each embedded turn. And the time the step takes to load (embedding its examples
and fitting), which happens once, off the turn.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

from home.intent.step import IntentStep, Verb, load_intent_step
from home.memory.keep_gate import load_keep_gate
from tests.bench.report import Result, publish, quantile
from tests.support.intent_set import HELD_OUT, StepScore, read_half, score_step, unseen

PEER = "no cues"
GOAL_NOTE = "goal >= 0.9 precision, >= 0.85 recall per verb"


def _timed(judge: Callable[[list[str]], object], texts: list[str]) -> list[float]:
    """Milliseconds to judge each utterance alone."""
    times = []
    for text in texts:
        started = time.perf_counter()
        judge([text])
        times.append((time.perf_counter() - started) * 1000)
    return times


def _worst(score: StepScore) -> tuple[float, str]:
    """The lowest recall of a verb (chat left out), and that verb."""
    low = min((v for v in score.verbs if v.verb is not Verb.CHAT), key=lambda v: v.recall)
    return low.recall, low.verb.value


def main() -> None:
    """Run the benchmark and publish ``bench-results/intent.json``."""
    warnings.filterwarnings("ignore", module="sklearn")
    started = time.perf_counter()
    step = load_intent_step()
    load_s = time.perf_counter() - started
    blind = IntentStep(step.embedder, step.examples, use_cues=False)
    results: list[Result] = []
    everything: list[str] = []
    for name, path in HELD_OUT.items():
        labelled = unseen(step, read_half(path, "held_out"))
        everything += [t for texts in labelled.values() for t in texts]
        ours, peers = score_step(step, labelled), score_step(blind, labelled)
        n = sum(v.support for v in ours.verbs)

        (recall, verb), (peer_recall, _) = _worst(ours), _worst(peers)
        labels: dict[str, str | float] = {"set": name, "half": "held-out"}
        results += [
            Result(
                f"{name}: macro precision",
                ours.macro("precision"),
                "share",
                n,
                PEER,
                peers.macro("precision"),
                GOAL_NOTE,
                labels,
            ),
            Result(
                f"{name}: worst verb's recall",
                recall,
                "share",
                n,
                PEER,
                peer_recall,
                f"worst: {verb}",
                labels | {"verb": verb},
            ),
            Result(
                f"{name}: accuracy", ours.accuracy, "share", n, PEER, peers.accuracy, "", labels
            ),
        ]
    gate = load_keep_gate()
    ours_ms, gate_ms = _timed(step.decide, everything), _timed(gate.judge, everything)
    for q in (0.5, 0.99):
        results.append(
            Result(
                f"judge one utterance, p{int(q * 100)}",
                quantile(ours_ms, q),
                "ms",
                len(everything),
                "keep gate, same utterance",
                quantile(gate_ms, q),
                "goal <= 15 ms p99 (one onnxruntime thread)" if q == 0.99 else "",
            )
        )
    results.append(
        Result(
            "load (embed examples, fit)",
            load_s,
            "s",
            sum(map(len, step.examples.values())),
            note="once per agent process, off the turn",
        )
    )
    publish("intent", results)


if __name__ == "__main__":
    main()
