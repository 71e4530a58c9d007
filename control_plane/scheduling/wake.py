"""Which waiting clients a freed or new slot wakes.

A check-in that finds no offer waits (the live :class:`control_plane.waiters.WaitQueue`, the
simulator's :class:`propius.simulator.waitpool.WaitPool`) instead of polling. A slot wakes a few more
clients than it has room for, because some decline (private constraints, checked on the device) or
lose the race to bind: the oldest eligible waiters or, when the policy has a wake key
(:meth:`policies.Policy.wake_key`, e.g. the predicted fastest), the lowest keys among a bounded number
of the oldest, so the cost of a wake stays in proportion to the slots it fills however many wait.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["WakeRule"]

W = TypeVar("W")


@dataclass(frozen=True)
class WakeRule:
    overwake: float = 2.0  # waiters woken per free slot
    scan: int = 8  # a keyed wake ranks the scan x budget oldest eligible waiters

    def budget(self, slots: int) -> int:
        """Waiters to wake for ``slots`` free slots: ``overwake`` each, at least one."""
        return max(1, int(slots * self.overwake)) if slots > 0 else 0

    def choose(self, oldest_first: Iterable[W], slots: int, key: Callable[[W], float] | None = None) -> list[W]:
        """The waiters to wake, from the eligible ones in arrival order: the oldest ``budget``, or the
        ``budget`` lowest ``key`` among the ``scan x budget`` oldest (the oldest among equal keys)."""
        budget = self.budget(slots)
        oldest = list(itertools.islice(oldest_first, budget if key is None else self.scan * budget))
        return oldest if key is None else heapq.nsmallest(budget, oldest, key=key)
