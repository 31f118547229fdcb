"""Keeping a device's conversation bounded: the node asks τ to compact it (docs/architecture.md
"Sessions").

τ compacts on its own when the model server's reported prompt size nears the
window. The embedded server shows the model only the last turns and reports that
small prompt, so τ never would, and a device's conversation (the context τ sends
and keeps) would grow without end. So after each turn the node measures the
context τ holds for the conversation it ran in, counted as τ's own compaction
counts it (``tau_agent_core.compaction.count_message``), and past
:attr:`CompactionPolicy.at_tokens` sends τ's RPC ``compact``. τ summarizes all but
its last ``keep_recent_tokens`` into one compaction entry (the earlier turns'
gist), and the next turn's context is that summary and the recent turns.

The threshold is twice what τ keeps, so a compaction always has turns to fold.
After one (folded, or not), the next waits until the context has grown by half
of what τ keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tau_agent_core.compaction import count_message

from home.llm.endpoint import ModelEndpoint


@dataclass(frozen=True)
class CompactionOutcome:
    """τ's ``compaction_end``: whether it folded, and what the context held before."""

    performed: bool
    error: str | None = None
    tokens_before: int | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> CompactionOutcome:
        """Read a ``compaction_end`` notification's params."""
        error = params.get("error")
        tokens = params.get("tokens_before")
        if params.get("is_error") or params.get("cancelled"):
            reason = error if isinstance(error, str) else "cancelled"
            return cls(performed=False, error=reason)
        return cls(
            performed=bool(params.get("performed")),
            tokens_before=tokens if isinstance(tokens, int) else None,
        )


def context_tokens(messages: list[dict[str, Any]]) -> int:
    """The context's size as τ's compaction counts it (its default counter)."""
    return sum(count_message(m).tokens for m in messages if isinstance(m, dict))


@dataclass
class CompactionPolicy:
    """When a conversation is compacted: past :attr:`at_tokens`, and not again until its
    context has grown by half of what τ keeps since the last compaction or attempt."""

    keep_recent_tokens: int
    at_tokens: int
    _floors: dict[str, int] = field(default_factory=dict)

    @classmethod
    def for_endpoint(cls, model: ModelEndpoint) -> CompactionPolicy:
        """Sized to what τ keeps for this model (:meth:`ModelEndpoint.compaction`)."""
        keep = int(model.compaction()["keep_recent_tokens"])
        return cls(keep_recent_tokens=keep, at_tokens=2 * keep)

    def due(self, session_id: str, tokens: int) -> bool:
        """Whether a conversation whose context holds ``tokens`` should be compacted now."""
        return tokens >= max(self.at_tokens, self._floors.get(session_id, 0))

    def settled(self, session_id: str, tokens: int) -> None:
        """The context held ``tokens`` after a compaction, or when one folded nothing.

        τ's summary and the turns it keeps can come close to :attr:`at_tokens` on
        their own; measuring from here keeps a compaction from following every turn.
        """
        self._floors[session_id] = tokens + self.keep_recent_tokens // 2


# What a compaction the node asked for came to: τ folded it, τ had folded it itself as
# the turn ended (the context shrank, and ``compact`` found it ending in that
# summary), or nothing was folded.
Verdict = Literal["performed", "tau_compacted", "unperformed"]


def compaction_verdict(tokens: int, after: int, outcome: CompactionOutcome) -> Verdict:
    """Judge a compaction by its outcome and the context before (``tokens``) and after."""
    if outcome.performed:
        return "performed"
    if after < tokens:
        return "tau_compacted"
    return "unperformed"
