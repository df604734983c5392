"""A circuit breaker per agent: after repeated failures, refuse calls for a while.

Closed: calls pass; `failures` consecutive failures open it. Open: calls are refused until
`open_seconds` have passed. Then one trial call is let through (half-open): a success closes
the circuit, a failure opens it again. State is per gateway process.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class Breaker:
    def __init__(self, failures: int, open_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = failures
        self.open_seconds = open_seconds
        self.clock = clock
        self.failures = 0
        self.open_until: float | None = None
        self.trial = False

    def retry_after(self) -> int | None:
        """Seconds until calls are allowed again, or None when this call may go ahead."""
        if self.open_until is None:
            return None
        remaining = self.open_until - self.clock()
        if remaining > 0 or self.trial:
            return max(1, math.ceil(remaining))
        self.trial = True  # half-open: this caller is the trial
        return None

    def success(self) -> None:
        self.failures = 0
        self.open_until = None
        self.trial = False

    def release(self) -> None:
        """The call ended without telling anything about the agent: a trial may run again."""
        self.trial = False

    def failure(self) -> None:
        self.failures += 1
        if self.trial or self.failures >= self.threshold:
            self.open_until = self.clock() + self.open_seconds
            self.trial = False


class Breakers:
    """One breaker per agent id, created on first use."""

    def __init__(self, failures: int, open_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = failures
        self.open_seconds = open_seconds
        self.clock = clock
        self._breakers: dict[str, Breaker] = {}

    def for_agent(self, agent_id: str) -> Breaker:
        breaker = self._breakers.get(agent_id)
        if breaker is None:
            breaker = Breaker(self.failures, self.open_seconds, self.clock)
            self._breakers[agent_id] = breaker
        return breaker

    def forget(self, agent_id: str) -> None:
        self._breakers.pop(agent_id, None)
