"""Idle clients waiting for a slot: the simulator's counterpart of ``control_plane.waiters.WaitQueue``.

Same contract as the live queue: clients wait in arrival order, and a freed or new slot wakes the
waiters that the live :class:`~control_plane.scheduling.wake.WakeRule` picks among those the slot's
job admits; they check in again. The live queue tests each waiter's attributes
against the job's constraints; here each client carries a bit mask of what it is eligible for
(computed once with the same constraint code), and waiters are kept in one queue per mask, so a
wake-up looks only at eligible waiters: O(masks + woken); by key, O(masks + scan x woken).
"""

from __future__ import annotations

import heapq
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
        queues = [queue for mask, queue in self._queues.items() if mask & bit and queue]
        merged = heapq.merge(*(queue.items() for queue in queues), key=lambda item: item[1])
        oldest_first = (client for client, _ in merged if client not in skip)
        woken = self._rule.choose(oldest_first, slots, key)
        for client in woken:
            del self._queues[self._mask_of.pop(client)][client]
        return woken
