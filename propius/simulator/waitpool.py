"""Idle clients waiting for a slot: the simulator's counterpart of ``control_plane.waiters.WaitQueue``.

Same contract as the live queue: clients wait in arrival order, and a freed or new slot wakes the
waiters that the live :class:`~control_plane.scheduling.wake.WakeRule` picks among those the slot's
job admits; they check in again. The live queue tests each waiter's attributes
against the job's constraints (once per class); here each client carries a bit mask of what it is eligible
for (computed once with the same constraint code), and waiters are kept in one queue per mask, so a
wake-up sorts only the heads of the eligible queues: at most ``masks x n`` items for the n waiters the rule
looks at (:meth:`WakeRule.looks_at`).
"""

from __future__ import annotations

import itertools
import operator
from collections import OrderedDict
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet

from control_plane.scheduling.wake import WakeRule

__all__ = ["WaitPool"]


class WaitPool:
    def __init__(self, rule: WakeRule | None = None) -> None:
        self._queues: dict[int, OrderedDict[int, int]] = {}  # mask -> client -> ticket
        self._mask_of: dict[int, int] = {}
        self._ticket = 0
        self._rule = rule or WakeRule()

    def __len__(self) -> int:
        return len(self._mask_of)

    def __contains__(self, client: int) -> bool:
        return client in self._mask_of

    def add(self, client: int, mask: int) -> None:
        self._ticket += 1
        self._mask_of[client] = mask
        queue = self._queues.get(mask)
        if queue is None:
            queue = self._queues[mask] = OrderedDict()
        queue[client] = self._ticket

    def remove(self, client: int) -> None:
        mask = self._mask_of.pop(client, None)
        if mask is not None:
            del self._queues[mask][client]

    def waiting(self, bit: int) -> Iterator[int]:
        """The waiters whose mask has ``bit``."""
        for mask, queue in self._queues.items():
            if mask & bit:
                yield from queue

    def wake(self, bit: int, slots: int, key: Callable[[int], float] | None = None,
             skip: AbstractSet[int] = frozenset()) -> list[int]:
        """Remove and return the waiters the wake rule picks among those whose mask has ``bit``, ``skip``
        left out."""
        woken = self._rule.choose(self._oldest(bit, self._rule.looks_at(slots, key is not None), skip), slots, key)
        for client in woken:
            del self._queues[self._mask_of.pop(client)][client]
        return woken

    def _oldest(self, bit: int, count: int, skip: AbstractSet[int]) -> list[int]:
        """The ``count`` oldest waiters whose mask has ``bit``, ``skip`` left out, oldest first. Each queue is
        in arrival order, so only its first ``count + len(skip)`` can be among them: those are gathered and
        sorted by ticket, which costs far less than merging the queues item by item."""
        per_queue = count + len(skip)
        heads = [item for mask, queue in self._queues.items() if mask & bit
                 for item in itertools.islice(queue.items(), per_queue)]
        heads.sort(key=operator.itemgetter(1))
        return list(itertools.islice((client for client, _ in heads if client not in skip), count))
