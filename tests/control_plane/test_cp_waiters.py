"""The live wait queue tests a waiter against a class once and remembers it: wakes of different classes,
and of equal classes built anew, still wake exactly the waiters each admits."""

from __future__ import annotations

import asyncio

from control_plane.scheduling.wake import WakeRule
from control_plane.waiters import WaitQueue
from propius.specs import Constraints


def test_each_class_wakes_only_the_waiters_it_admits_however_often_it_is_tested(wait_for) -> None:
    ram = {"a": 2, "b": 8, "c": 4, "d": 8, "e": 2, "f": 6}

    async def run() -> list[list[str]]:
        queue = WaitQueue(WakeRule(overwake=1.0))
        waits = [asyncio.create_task(queue.wait(client, {"ram": ram_gb}, 5.0)) for client, ram_gb in ram.items()]

        async def all_waiting() -> bool:
            return len(queue) == len(ram)

        await wait_for(all_waiting, what="every client to wait")
        def big() -> Constraints:  # an equal class, built anew for each wake
            return Constraints.model_validate({"ram": {"min": 6}})

        def wake(constraints: Constraints, slots: int) -> list[str]:
            return queue.wake(constraints.to_json(), constraints, slots)

        small = Constraints.model_validate({"ram": {"max": 4}})
        woken = [
            wake(big(), 1),  # b: the oldest with 6 GB or more
            wake(small, 1),  # a: tested against this class for the first time
            wake(big(), 5),  # d, f: the others of the class; a, c, e stay remembered as refused
            wake(small, 5),  # c, e: what is left of it
            wake(big(), 5),  # nobody is left
        ]
        for wait in waits:
            wait.cancel()
        return woken

    assert asyncio.run(run()) == [["b"], ["a"], ["d", "f"], ["c", "e"], []]
