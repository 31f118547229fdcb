"""What ``home memory judge`` reports: the keep gate's verdict and the memory text per utterance.

The gate is the reflex's own (:mod:`home.memory.keep_gate`); the memory text is, as the
reflex decides it, the draft when it reads as a slot fact (``slot``), else the model's
restatement when a model is given, else the rule-based draft (:mod:`home.memory.restate`),
and each judgement says which.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from home.memory.keep_gate import KeepGate, Verdict
from home.memory.restate import restate_draft, slot_fact

MemorySource = Literal["slot", "model", "draft"]


@dataclass(frozen=True)
class Judgement:
    """One utterance judged: keep or skip, the score, and what would be stored if kept."""

    utterance: str
    verdict: Verdict
    memory: str | None
    memory_source: MemorySource | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "utterance": self.utterance,
            "decision": self.verdict.decision,
            "score": self.verdict.score,
            "cue": self.verdict.cue.value,
            "memory": self.memory,
            "memory_source": self.memory_source,
        }


async def judge_utterances(
    gate: KeepGate,
    utterances: Sequence[str],
    restate: Callable[[str], Awaitable[str]] | None = None,
) -> list[Judgement]:
    """Gate every utterance; restate the kept ones (with ``restate``, else the draft)."""
    judgements = []
    for utterance, verdict in zip(utterances, gate.judge(utterances), strict=True):
        slot = slot_fact(utterance) if verdict.keep else None
        if not verdict.keep:
            judgements.append(Judgement(utterance, verdict, None, None))
        elif slot is not None:
            judgements.append(Judgement(utterance, verdict, slot, "slot"))
        elif restate is None:
            judgements.append(Judgement(utterance, verdict, restate_draft(utterance), "draft"))
        else:
            judgements.append(Judgement(utterance, verdict, await restate(utterance), "model"))
    return judgements
