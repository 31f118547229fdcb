"""The reflex's configuration: the catalog's ``config`` block plus the node's run context.

Read from τ's ``api.config`` (``--ext-config memory_reflex:KEY=JSON``); every key is
checked here, and a bad one is a :class:`MemoryConfigError` naming it. Defaults work::

    roots: [workspace/edge_asr_memory]        # or [{path: ..., decay: true}, ...]
    threshold: 0.3     # cosine at or above which a hit may be threaded in (decay only ranks)
    k: 5               # memories shown at most per root (a decaying root ranks 2k found)
    every_n: 4         # an evaluation every N user turns (0: never)
    evaluator_model: null   # a τ model name; null is the session's own model
    memory_root: workspace/<agent>   # where deposits go
    knowledge_root: knowledge/<agent>   # entities and triples of what was kept (null: none)
    dedup_threshold: 0.9    # a stored memory this close to a new fact is the same memory
    evaluation_wait_s: 10   # recall waits this long for an evaluation still running
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from home.memory.errors import MemoryConfigError
from home.memory.kinds import MemoryKind, parse_kinds
from shared.errors import SubjectError
from shared.subjects import check_name

DEFAULT_THRESHOLD = 0.3
DEFAULT_K = 5
DEFAULT_EVERY_N = 4
DEFAULT_DEDUP_THRESHOLD = 0.9
DEFAULT_INITIAL_STABILITY_DAYS = 3.0
DEFAULT_SEARCH_TIMEOUT_S = 5.0
DEFAULT_EVALUATION_WAIT_S = 10.0
LEDGER_DIRNAME = "memory_reflex"


@dataclass(frozen=True)
class RootSpec:
    """One recall root: a titled path (``workspace/x``) or ``#id``, whether it decays, and
    the kinds of memory recalled from it (None: every kind; :mod:`home.memory.kinds`)."""

    path: str
    decay: bool = False
    kinds: tuple[MemoryKind, ...] | None = None


@dataclass(frozen=True)
class ReflexConfig:
    """Everything the reflex is told, checked."""

    agent: str
    nats_url: str
    binding_file: Path
    jmfts_url: str
    jmfts_token_file: Path
    roots: tuple[RootSpec, ...]
    memory_root: str
    knowledge_root: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    k: int = DEFAULT_K
    every_n: int = DEFAULT_EVERY_N
    evaluator_model: str | None = None
    dedup_threshold: float = DEFAULT_DEDUP_THRESHOLD
    initial_stability_days: float = DEFAULT_INITIAL_STABILITY_DAYS
    search_timeout_s: float = DEFAULT_SEARCH_TIMEOUT_S
    evaluation_wait_s: float = DEFAULT_EVALUATION_WAIT_S
    ledger_dir: Path | None = None

    @property
    def ledger_path(self) -> Path:
        """Where searches and uses are appended (one JSON object a line)."""
        return self.state_dir / "searches.jsonl"

    @property
    def reviews_path(self) -> Path:
        """Where the FSRS review book is kept."""
        return self.state_dir / "reviews.json"

    @property
    def state_dir(self) -> Path:
        """The reflex's own directory, beside the node's binding file by default."""
        return self.ledger_dir or self.binding_file.parent / LEDGER_DIRNAME


def _text(config: dict[str, Any], key: str, default: str | None = None) -> str:
    value = config.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise MemoryConfigError(f"memory_reflex config {key!r}: expected text, got {value!r}")
    return value.strip()


def _number(config: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MemoryConfigError(f"memory_reflex config {key!r}: expected a number, got {value!r}")
    if not lo <= float(value) <= hi:
        raise MemoryConfigError(f"memory_reflex config {key!r}: {value} is outside [{lo}, {hi}]")
    return float(value)


def _count(config: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise MemoryConfigError(
            f"memory_reflex config {key!r}: expected a whole number in [{lo}, {hi}], got {value!r}"
        )
    return value


def _roots(raw: Any, agent: str) -> tuple[RootSpec, ...]:
    if raw is None:
        return (RootSpec(f"workspace/{agent}"),)
    if not isinstance(raw, list) or not raw:
        raise MemoryConfigError(
            f"memory_reflex config 'roots': expected a non-empty list, got {raw!r}"
        )
    roots = []
    for i, item in enumerate(raw):
        if isinstance(item, str) and item.strip():
            roots.append(RootSpec(item.strip()))
        elif isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"].strip():
            unknown = set(item) - {"path", "decay", "kinds"}
            if unknown:
                raise MemoryConfigError(
                    f"memory_reflex config 'roots[{i}]': unknown key(s) {sorted(unknown)}"
                )
            decay = item.get("decay", False)
            if not isinstance(decay, bool):
                raise MemoryConfigError(
                    f"memory_reflex config 'roots[{i}].decay': expected true or false, "
                    f"got {decay!r}"
                )
            roots.append(RootSpec(item["path"].strip(), decay, _kinds(item.get("kinds"), i)))
        else:
            raise MemoryConfigError(
                f"memory_reflex config 'roots[{i}]': expected a path or {{path, decay, kinds}}, "
                f"got {item!r}"
            )
    return tuple(roots)


def _kinds(raw: Any, i: int) -> tuple[MemoryKind, ...] | None:
    try:
        return parse_kinds(raw)
    except ValueError as exc:
        raise MemoryConfigError(f"memory_reflex config 'roots[{i}].kinds': {exc}") from exc


KNOWN_KEYS = frozenset(
    {
        "agent",
        "nats_url",
        "binding_file",
        "jmfts_url",
        "jmfts_token_file",
        "roots",
        "memory_root",
        "knowledge_root",
        "threshold",
        "k",
        "every_n",
        "evaluator_model",
        "dedup_threshold",
        "initial_stability_days",
        "search_timeout_s",
        "evaluation_wait_s",
        "ledger_dir",
    }
)


def parse_config(config: dict[str, Any]) -> ReflexConfig:
    """Check ``api.config`` and build the reflex's configuration."""
    unknown = set(config) - KNOWN_KEYS
    if unknown:
        raise MemoryConfigError(
            f"memory_reflex config: unknown key(s) {sorted(unknown)}; known: {sorted(KNOWN_KEYS)}"
        )
    try:
        agent = check_name(_text(config, "agent"), "memory_reflex config 'agent'")
    except SubjectError as exc:
        raise MemoryConfigError(str(exc)) from exc
    model = config.get("evaluator_model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise MemoryConfigError(
            f"memory_reflex config 'evaluator_model': expected a model name, got {model!r}"
        )
    ledger_dir = config.get("ledger_dir")
    return ReflexConfig(
        agent=agent,
        nats_url=_text(config, "nats_url"),
        binding_file=Path(_text(config, "binding_file")),
        jmfts_url=_text(config, "jmfts_url"),
        jmfts_token_file=Path(_text(config, "jmfts_token_file")),
        roots=_roots(config.get("roots"), agent),
        memory_root=_text(config, "memory_root", f"workspace/{agent}"),
        knowledge_root=(
            _text(config, "knowledge_root", f"knowledge/{agent}")
            if config.get("knowledge_root", "") is not None
            else None
        ),
        threshold=_number(config, "threshold", DEFAULT_THRESHOLD, 0.0, 1.0),
        k=_count(config, "k", DEFAULT_K, 1, 100),
        every_n=_count(config, "every_n", DEFAULT_EVERY_N, 0, 10_000),
        evaluator_model=model.strip() if isinstance(model, str) else None,
        dedup_threshold=_number(config, "dedup_threshold", DEFAULT_DEDUP_THRESHOLD, 0.0, 1.0),
        initial_stability_days=_number(
            config, "initial_stability_days", DEFAULT_INITIAL_STABILITY_DAYS, 0.01, 36_500.0
        ),
        search_timeout_s=_number(config, "search_timeout_s", DEFAULT_SEARCH_TIMEOUT_S, 0.1, 120.0),
        evaluation_wait_s=_number(
            config, "evaluation_wait_s", DEFAULT_EVALUATION_WAIT_S, 0.0, 120.0
        ),
        ledger_dir=Path(_text(config, "ledger_dir")) if ledger_dir is not None else None,
    )
