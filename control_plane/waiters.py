"""Long-polling check-ins: clients wait here until a slot they are eligible for opens.

This is what makes binding event-driven: a round start or a freed slot wakes just enough eligible
waiters (oldest first) instead of every client polling on a fixed interval.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from propius.specs import AttributeValue, Constraints

__all__ = ["WaitQueue"]


@dataclass
class _Waiter:
    attributes: dict[str, AttributeValue]
    future: asyncio.Future[None]


class WaitQueue:
    """FIFO of waiting clients; ``wake(constraints, n)`` resolves up to ``n`` eligible waiters."""

    def __init__(self, overwake: float = 2.0) -> None:
        self._waiters: OrderedDict[int, _Waiter] = OrderedDict()
        self._next = 0
        # Some woken clients decline (private constraints) or lose the race: wake a few more than slots.
        self._overwake = overwake

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, attributes: dict[str, AttributeValue], timeout: float) -> bool:
        """True when woken for a slot, False on timeout."""
        ticket = self._next
        self._next += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[ticket] = _Waiter(attributes, future)
        try:
            await asyncio.wait_for(future, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.pop(ticket, None)

    def wake(self, constraints: Constraints, slots: int) -> int:
        budget = max(1, int(slots * self._overwake)) if slots > 0 else 0
        woken = 0
        for ticket, waiter in list(self._waiters.items()):
            if woken >= budget:
                break
            if not waiter.future.done() and constraints.admits(waiter.attributes):
                waiter.future.set_result(None)
                del self._waiters[ticket]
                woken += 1
        return woken
