"""Long-polling check-ins: clients wait here until a slot they are eligible for opens.

This is what makes binding event-driven: a round start or a freed slot wakes just enough eligible
waiters (:class:`~control_plane.scheduling.wake.WakeRule`) instead of every client polling on a fixed
interval.

A keyed wake looks at thousands of waiters (``WakeRule.scan_floor``), so each waiter remembers whether each
class it was tested against admits it: its attributes do not change while it waits, and testing the
constraints again at every wake took most of the wake's time (``benchmarks/wake_cost.py``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from control_plane.scheduling.wake import WakeRule
from propius.specs import AttributeValue, Constraints

__all__ = ["WaitQueue"]


@dataclass
class _Waiter:
    client_id: str
    attributes: dict[str, AttributeValue]
    future: asyncio.Future[None]
    eligible: dict[str, bool] = field(default_factory=dict)  # eligibility class -> admitted, tested once each

    def admitted(self, eligibility_key: str, constraints: Constraints) -> bool:
        known = self.eligible.get(eligibility_key)
        if known is None:
            known = self.eligible[eligibility_key] = constraints.admits(self.attributes)
        return known


class WaitQueue:
    """FIFO of waiting clients; ``wake(class, constraints, n)`` resolves up to ``n`` eligible waiters."""

    def __init__(self, rule: WakeRule | None = None) -> None:
        self._waiters: OrderedDict[int, _Waiter] = OrderedDict()
        self._next = 0
        self._rule = rule or WakeRule()

    def __len__(self) -> int:
        return len(self._waiters)

    def client_ids(self) -> list[str]:
        """The waiting clients (a read for metrics and the dashboard)."""
        return [waiter.client_id for waiter in self._waiters.values()]

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

    def wake(self, eligibility_key: str, constraints: Constraints, slots: int,
             key: Callable[[str], float] | None = None, skip: AbstractSet[str] = frozenset()) -> list[str]:
        """Wake the waiters :class:`WakeRule` picks among those ``constraints`` admit (the class named
        ``eligibility_key``, :meth:`~propius.specs.Requirements.eligibility_key`), ``skip`` left out, ``key``
        ranking client ids; the client ids woken."""
        eligible = (
            (ticket, waiter) for ticket, waiter in self._waiters.items()
            if not waiter.future.done() and waiter.client_id not in skip
            and waiter.admitted(eligibility_key, constraints)
        )
        chosen = self._rule.choose(eligible, slots, None if key is None else lambda item: key(item[1].client_id))
        for ticket, waiter in chosen:
            waiter.future.set_result(None)
            del self._waiters[ticket]
        return [waiter.client_id for _, waiter in chosen]
