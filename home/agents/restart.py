"""The restart policy of a node, as a pure tracker of restart times."""

from __future__ import annotations

from collections import deque

from home.agents.errors import RestartBudgetExhausted
from shared.schema.catalog import RestartPolicy


class RestartTracker:
    """At most ``max_restarts`` within ``window_s``; backoff doubles up to the max."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._times: deque[float] = deque()
        self.total = 0

    def next_delay(self, now: float) -> float:
        """Record a restart at ``now`` and return how long to wait before it.

        Raises RestartBudgetExhausted when the window already holds ``max_restarts``.
        """
        while self._times and now - self._times[0] > self.policy.window_s:
            self._times.popleft()
        if len(self._times) >= self.policy.max_restarts:
            raise RestartBudgetExhausted(
                f"{len(self._times)} restarts within {self.policy.window_s:g}s; "
                f"the policy allows {self.policy.max_restarts}"
            )
        delay = float(
            min(self.policy.backoff_s * 2.0 ** len(self._times), self.policy.backoff_max_s)
        )
        self._times.append(now)
        self.total += 1
        return delay
