"""Field checks shared by the schema loaders: each returns an error text or None."""

from __future__ import annotations

import re
from collections.abc import Callable

from shared.errors import SubjectError
from shared.subjects import NAME_TOKEN, split_subject

NODE_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")


def subject_pattern(value: str) -> str | None:
    """A valid NATS subject or pattern."""
    try:
        split_subject(value)
    except SubjectError as exc:
        return str(exc)
    return None


def name_token(value: str) -> str | None:
    """One lowercase token, as device and agent names must be."""
    return None if NAME_TOKEN.fullmatch(value) else f"must match [a-z0-9_-]+, got {value!r}"


def node_name(value: str) -> str | None:
    """Dotted lowercase tokens, e.g. ``agent.edge_asr``."""
    if NODE_NAME.fullmatch(value):
        return None
    return f"node names are dotted lowercase tokens like 'agent.edge_asr', got {value!r}"


def memory_path(value: str) -> str | None:
    """A JMFTS subtree as a titled path of lowercase tokens, e.g. ``workspace/edge_asr``."""
    parts = value.split("/")
    if len(parts) >= 2 and all(NAME_TOKEN.fullmatch(p) for p in parts):
        return None
    return f"must be a subtree path like 'workspace/edge_asr' (tokens [a-z0-9_-]+), got {value!r}"


def positive(value: int | float) -> str | None:
    """Strictly greater than zero."""
    return None if value > 0 else f"must be > 0, got {value}"


def non_negative(value: int | float) -> str | None:
    """Zero or more."""
    return None if value >= 0 else f"must be >= 0, got {value}"


def port(value: int) -> str | None:
    """A TCP port (0 means any free port)."""
    return None if 0 <= value <= 65535 else f"must be a TCP port 0-65535, got {value}"


def one_of(*choices: str) -> Callable[[str], str | None]:
    """A check accepting only ``choices``."""

    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}; got {value!r}"

    return check
