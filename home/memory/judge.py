"""What ``home memory judge`` reports: what the reflex would keep, and as what.

The judge runs the reflex's own path (:mod:`home.memory.extract`) for the home it is
pointed at: with the embedded model (a model that declares a grammar), the keep gate
decides and each kept utterance becomes its draft; with a model behind ``--llm-url``
(no grammar), that model is asked what the reflex's evaluator is asked and each fact it
names is checked against what was said. Each memory says which path wrote it and, when
the check refused it, the words nobody said.

The home's model is read from the agent's τ home (``DATA_DIR/agents/AGENT/tau-home/
config.json``, written by the node at start), so the judge and the running reflex agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from home.memory.errors import RestatementError
from home.memory.evaluator import EVALUATOR_PROMPT, EVALUATOR_SYSTEM, parse_facts
from home.memory.extract import Extracted, ExtractionPath, drafted, from_model
from home.memory.keep_gate import KeepGate, Verdict

DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class EvaluatorModel:
    """The model the reflex's conversation form asks (a model without a grammar)."""

    base_url: str
    model: str
    api_key: str = "none"


@dataclass(frozen=True)
class HomeEvaluator:
    """Which path a home's reflex writes memories by, and the model it asks, if any."""

    path: ExtractionPath
    model: EvaluatorModel | None = None
    source: str = "the embedded defaults"


def home_evaluator(data_dir: Path, agent: str) -> HomeEvaluator:
    """The path ``agent``'s reflex takes in the home at ``data_dir``, from its τ home.

    An agent that has not run yet (no τ home) is judged as the embedded defaults would
    run it. A τ home that cannot be read is a RestatementError naming the file.
    """
    path = data_dir / "agents" / agent / "tau-home" / "config.json"
    if not path.exists():
        return HomeEvaluator("draft")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        entry = config["models"][config["default_model"]]
        grammar, base_url, model = entry.get("grammar"), entry["base_url"], entry["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RestatementError(f"{path}: not a τ home config with a model: {exc!r}") from exc
    if grammar is not None:
        return HomeEvaluator("draft", source=str(path))
    key = entry.get("api_key")
    return HomeEvaluator(
        "model",
        EvaluatorModel(str(base_url), str(model), key if isinstance(key, str) else "none"),
        str(path),
    )


@dataclass(frozen=True)
class Judgement:
    """One utterance judged: the keep gate's verdict and, on the draft path, its memory."""

    utterance: str
    verdict: Verdict
    memory: Extracted | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "utterance": self.utterance,
            "decision": self.verdict.decision,
            "score": self.verdict.score,
            "cue": self.verdict.cue.value,
            "memory": None if self.memory is None else self.memory.memory,
            "memory_source": None if self.memory is None else self.memory.path,
        }


@dataclass(frozen=True)
class Judged:
    """Everything the judge found: the path, each utterance's verdict, every memory."""

    path: ExtractionPath
    judgements: list[Judgement]
    memories: list[Extracted] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "path": self.path,
            "judgements": [j.to_dict() for j in self.judgements],
            "memories": [m.to_dict() for m in self.memories],
        }


async def ask_evaluator(
    http: httpx.AsyncClient, model: EvaluatorModel, utterances: Sequence[str]
) -> list[str]:
    """The facts the reflex's conversation-form evaluator names for ``utterances``."""
    body = {
        "model": model.model,
        "messages": [
            {"role": "system", "content": EVALUATOR_SYSTEM},
            *({"role": "user", "content": u} for u in utterances),
            {"role": "user", "content": EVALUATOR_PROMPT},
        ],
        "temperature": 0.0,
    }
    url = f"{model.base_url.rstrip('/')}/chat/completions"
    headers = {"Authorization": f"Bearer {model.api_key}"}
    try:
        response = await http.post(url, json=body, headers=headers, timeout=DEFAULT_TIMEOUT_S)
        response.raise_for_status()
        content = response.json()["choices"][0]["message"]["content"]
    except httpx.HTTPError as exc:
        raise RestatementError(f"POST {url}: {exc}") from exc
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise RestatementError(f"POST {url}: not a chat completion: {exc!r}") from exc
    return parse_facts(str(content or ""))


async def judge_utterances(
    gate: KeepGate,
    utterances: Sequence[str],
    evaluator: HomeEvaluator,
    http: httpx.AsyncClient | None = None,
) -> Judged:
    """Judge ``utterances`` as the reflex would for a home whose evaluator is ``evaluator``."""
    verdicts = gate.judge(utterances)
    if evaluator.path == "draft" or evaluator.model is None:
        judgements = [
            Judgement(u, v, drafted(u) if v.keep else None)
            for u, v in zip(utterances, verdicts, strict=True)
        ]
        memories = [j.memory for j in judgements if j.memory is not None]
        return Judged("draft", judgements, memories)
    if http is None:
        raise RestatementError("the model path needs an HTTP client")
    facts = await ask_evaluator(http, evaluator.model, utterances)
    judgements = [Judgement(u, v) for u, v in zip(utterances, verdicts, strict=True)]
    return Judged("model", judgements, from_model(facts, utterances))
