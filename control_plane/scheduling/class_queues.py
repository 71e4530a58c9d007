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

__all__ = ["ClassQueue", "class_queues", "waiting_by_class"]


@dataclass(frozen=True)
class ClassQueue:
    key: str  # the eligibility key: the class's public constraints as JSON
    supply: int  # recent clients the class admits
    open_rounds: int
    waiting_jobs: int  # open rounds with a free slot
    open_slots: int
    waiting_clients: int  # clients long-polling for an offer that the class admits


def waiting_by_class(waiting: Iterable[str], classes_of: Callable[[str], tuple[str, ...]]) -> dict[str, int]:
    """Waiting clients per class, from the classes each client is eligible for (``classes_of``)."""
    counts: dict[str, int] = {}
    for client_id in waiting:
        for key in classes_of(client_id):
            counts[key] = counts.get(key, 0) + 1
    return counts


def class_queues(views: Iterable[JobView], supply: Mapping[str, int], waiting: Mapping[str, int]) -> list[ClassQueue]:
    """One queue per class of ``supply`` (every active job's class) or of an open round in ``views``,
    sorted by free slots then supply, largest first; ``waiting``: waiting clients per class."""
    rounds: dict[str, list[JobView]] = {key: [] for key in supply}
    for view in views:
        rounds.setdefault(view.eligibility_key, []).append(view)
    queues = [
        ClassQueue(key=key, supply=supply.get(key, 0), open_rounds=len(members),
                   waiting_jobs=sum(1 for view in members if view.open_slots > 0),
                   open_slots=sum(view.open_slots for view in members), waiting_clients=waiting.get(key, 0))
        for key, members in rounds.items()
    ]
    return sorted(queues, key=lambda queue: (-queue.open_slots, -queue.supply, queue.key))
