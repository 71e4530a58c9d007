"""Long-polling check-ins: clients wait here until a slot they are eligible for opens.

This is what makes binding event-driven: a round start or a freed slot wakes just enough eligible
waiters instead of every client polling on a fixed interval: the oldest, or those the policy's wake
key ranks first (:meth:`policies.Policy.wake_key`, e.g. the predicted fastest for the job).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from propius.specs import AttributeValue, Constraints

__all__ = ["WaitQueue"]


@dataclass
class _Waiter:
    client_id: str
    attributes: dict[str, AttributeValue]
    future: asyncio.Future[None]


class WaitQueue:
    """FIFO of waiting clients; ``wake(constraints, n)`` resolves up to ``n`` eligible waiters."""

    def __init__(self, overwake: float = 2.0, scan: int = 8) -> None:
        self._waiters: OrderedDict[int, _Waiter] = OrderedDict()
        self._next = 0
        # Some woken clients decline (private constraints) or lose the race: wake a few more than slots.
        self._overwake = overwake
        # A keyed wake-up ranks only the scan x budget oldest eligible waiters: its cost stays in
        # proportion to the slots it fills, however many clients wait.
        self._scan = scan

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, client_id: str, attributes: dict[str, AttributeValue], timeout: float) -> bool:
        """True when woken for a slot, False on timeout."""
        ticket = self._next
        self._next += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = _Waiter(client_id, attributes, future)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.pop(ticket, None)

    def wake(self, constraints: Constraints, slots: int, key: Callable[[str], float] | None = None) -> int:
        """Wake up to ``overwake x slots`` waiters that ``constraints`` admit: the oldest, or the lowest
        ``key(client_id)`` among the ``scan x`` as many oldest (the oldest among equal keys). Returns
        how many were woken."""
        budget = max(1, int(slots * self._overwake)) if slots > 0 else 0
        eligible = (
            (ticket, waiter) for ticket, waiter in self._waiters.items()
            if not waiter.future.done() and constraints.admits(waiter.attributes)
        )
        oldest = list(itertools.islice(eligible, budget if key is None else self._scan * budget))
        chosen = oldest if key is None else heapq.nsmallest(budget, oldest, key=lambda item: key(item[1].client_id))
        for ticket, waiter in chosen:
            waiter.future.set_result(None)
            del self._waiters[ticket]
        return len(chosen)
