"""The retry hint of a rate limit, and how long a client waits on it before giving up.

A control plane over a caller's rate answers RESOURCE_EXHAUSTED with "retry after N s" in the status
details. The hint travels in the details, not in trailing metadata, because a Multiplex stream carries
each call's status as a code and a message only: the message is what every transport keeps. Clients
(SDK, CLI, client daemon) wait the hint, stretched by a random factor so callers refused together do not
return together, and give up after a bounded number of refusals or seconds of waiting.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

__all__ = ["RetryBudget", "Throttle", "retry_after_s", "retry_after_text", "stretched"]

_HINT = re.compile(r"retry after (\d+(?:\.\d+)?) s")
MIN_WAIT_S = 0.01  # a hint rounded to "0.00 s" still means "not yet"


def retry_after_text(wait_s: float) -> str:
    """The hint as the server writes it into a status's details."""
    return f"retry after {wait_s:.2f} s"


def retry_after_s(details: str) -> float | None:
    """The wait a status's details ask for; None when they carry no hint (a refusal that waiting cannot fix,
    such as a model over the server's size limit)."""
    match = _HINT.search(details)
    return None if match is None else max(float(match.group(1)), MIN_WAIT_S)


def stretched(hint_s: float, rng: random.Random, jitter: float = 0.5) -> float:
    """``hint_s`` times a uniform factor in [1, 1 + ``jitter``]: never earlier than asked, spread out."""
    return hint_s * rng.uniform(1.0, 1.0 + jitter)


@dataclass(frozen=True)
class RetryBudget:
    """How long one call waits out rate limits: at most ``attempts`` refusals and ``total_s`` seconds of
    waiting; each wait is the hint times a uniform factor in [1, 1 + ``jitter``] (never earlier than asked)."""

    attempts: int = 10
    total_s: float = 30.0
    jitter: float = 0.5

    def start(self, rng: random.Random | None = None) -> Throttle:
        return Throttle(self, rng or random.Random())


@dataclass
class Throttle:
    """One call's refusals so far under its :class:`RetryBudget`."""

    budget: RetryBudget
    rng: random.Random
    refusals: int = 0
    waited_s: float = 0.0

    def next_wait(self, hint_s: float) -> float | None:
        """Seconds to wait before the next try, or None once the budget is spent (or the hint reaches past it)."""
        self.refusals += 1
        wait_s = stretched(hint_s, self.rng, self.budget.jitter)
        if self.refusals > self.budget.attempts or self.waited_s + wait_s > self.budget.total_s:
            return None
        self.waited_s += wait_s
        return wait_s

    def gave_up(self, details: str) -> str:
        """A message for the caller once :meth:`next_wait` said no: the server's words and what was waited."""
        return (f"{details} (rate limited {self.refusals} time(s); gave up after waiting {self.waited_s:.1f} s of a "
                f"budget of {self.budget.attempts} retries / {self.budget.total_s:g} s)")
