"""Idle clients waiting for a slot: the simulator's counterpart of ``control_plane.waiters.WaitQueue``.

Same contract as the live queue: clients wait in arrival order; a freed or new slot wakes up to
``overwake x slots`` (at least one) waiting clients that the slot's job admits, oldest first or,
when the policy has a wake key (:meth:`policies.Policy.wake_key`), lowest key first among the
``scan x`` as many oldest, and they check in again. The live queue tests each waiter's attributes
against the job's constraints; here each client carries a bit mask of what it is eligible for
(computed once with the same constraint code), and waiters are kept in one queue per mask, so a
wake-up looks only at eligible waiters: O(masks + woken); by key, O(masks + scan x woken).
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator

__all__ = ["WaitPool"]


class WaitPool:
    def __init__(self, overwake: float = 2.0, scan: int = 8) -> None:
        self._queues: dict[int, OrderedDict[int, int]] = {}  # mask -> client -> ticket
        self._mask_of: dict[int, int] = {}
        self._ticket = 0
        self._overwake = overwake
        self._scan = scan

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

    def wake(self, bit: int, slots: int, key: Callable[[int], float] | None = None) -> list[int]:
        """Remove and return waiters whose mask has ``bit``, up to the wake budget: the oldest, or
        the lowest ``key`` among the ``scan x budget`` oldest (the oldest among equal keys)."""
        budget = max(1, int(slots * self._overwake)) if slots > 0 else 0
        queues = [queue for mask, queue in self._queues.items() if mask & bit and queue]
        oldest = self._oldest(queues, budget if key is None else self._scan * budget)
        woken = oldest if key is None else heapq.nsmallest(budget, oldest, key=key)
        for client in woken:
            del self._queues[self._mask_of.pop(client)][client]
        return woken

    @staticmethod
    def _oldest(queues: list[OrderedDict[int, int]], budget: int) -> list[int]:
        """The ``budget`` oldest waiters of per-mask queues (each already in arrival order)."""
        merged = heapq.merge(*(queue.items() for queue in queues), key=lambda item: item[1])
        return [client for client, _ in itertools.islice(merged, budget)]
