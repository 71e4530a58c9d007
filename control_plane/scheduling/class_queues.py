"""The queue of each eligibility class: its supply, its open rounds and their free slots, its idle clients.

Jobs with equal public constraints compete for the same clients (one eligibility class), so the class,
not the job, is the unit an operator watches: a class whose free slots stay high while its supply is
low needs more clients; one with many waiting clients and no free slots has spare capacity. Read by the
metrics (``propius_class_*``) and by the dashboard's pool panel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from policies import JobView
from propius.specs import Constraints

__all__ = ["ClassQueue", "class_queues"]


@dataclass(frozen=True)
class ClassQueue:
    key: str  # the eligibility key: the class's public constraints as JSON
    supply: int  # recent clients the class admits
    open_rounds: int
    waiting_jobs: int  # open rounds with a free slot
    open_slots: int
    waiting_clients: int  # clients long-polling for an offer that the class admits


def class_queues(
    views: Iterable[JobView], supply: Mapping[str, int], waiting: Callable[[Constraints], int],
) -> list[ClassQueue]:
    """One queue per class of ``supply`` (every active job's class) or of an open round in ``views``,
    sorted by free slots then supply, largest first; ``waiting`` counts the idle clients constraints admit."""
    rounds: dict[str, list[JobView]] = {key: [] for key in supply}
    for view in views:
        rounds.setdefault(view.eligibility_key, []).append(view)
    queues = []
    for key, members in rounds.items():
        constraints = members[0].public if members else Constraints.model_validate_json(key or "{}")
        queues.append(ClassQueue(
            key=key, supply=supply.get(key, 0), open_rounds=len(members),
            waiting_jobs=sum(1 for view in members if view.open_slots > 0),
            open_slots=sum(view.open_slots for view in members), waiting_clients=waiting(constraints),
        ))
    return sorted(queues, key=lambda queue: (-queue.open_slots, -queue.supply, queue.key))
