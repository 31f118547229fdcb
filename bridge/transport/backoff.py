"""Reconnect delays: capped exponential backoff with full jitter."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delay ``n`` is uniform in ``[0, min(cap_s, base_s * 2**n)]``; :meth:`reset` after success.

    Full jitter keeps a fleet of boards from reconnecting in lockstep after home restarts.
    """

    base_s: float = 0.5
    cap_s: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def next_delay(self) -> float:
        """The delay before the next attempt; each call grows the ceiling until the cap."""
        ceiling = min(self.cap_s, self.base_s * (2 ** min(self.attempt, 32)))
        self.attempt += 1
        return self.rng.uniform(0.0, ceiling)

    def reset(self) -> None:
        """Start over from the base delay (after a link came up)."""
        self.attempt = 0
