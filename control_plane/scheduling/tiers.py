"""Speed tiers per eligibility class, as Venn cuts them: from the speeds of that class's own clients.

A policy that pins a round to the fastest of ``k`` speed tiers (IRS, ``propius``) expects that tier to
hold ``1/k`` of the clients that may serve the round. Tiers cut over all clients do not: in the device
table speed follows the attributes classes are drawn on, so a class that is a window at the slow end
holds about 1 % of the global fastest tier, and its pinned rounds fail. :class:`ClassTiers` cuts them
over the recent clients of each class with a learned speed (live: those seen within the client TTL; in
the simulator: those online). A driver refreshes it on its supply period; a decision reads a dict.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from control_plane.scheduling.history import ClientHistory, fast_task_bound, tier_bounds

__all__ = ["ClassTiers", "Cut"]


class Cut:
    """The learned speeds and transfer times of the recent clients, per class, as they are fed in."""

    def __init__(self, history: ClientHistory) -> None:
        self._learned = history.learned
        self.speeds: dict[str, list[float]] = {}
        self.transfer: dict[str, list[float]] = {}

    def add(self, client: Hashable, classes: Iterable[str]) -> None:
        speed, per_kbit = self._learned(client)
        if speed is None and per_kbit is None:
            return
        for key in classes:
            if speed is not None:
                self.speeds.setdefault(key, []).append(speed)
            if per_kbit is not None:
                self.transfer.setdefault(key, []).append(per_kbit)


class ClassTiers:
    """Per eligibility class: speed-tier bounds and the fastest tier's task time, over ``history``'s estimates.

    ``bounds`` maps a class to its bounds (a class with fewer learned clients than tiers is absent, and a
    policy falls back to the global ones, ``SchedulingContext.tiers_for``); ``fast_task_s`` is computed once
    per task shape and refresh, and falls back to the global estimate likewise.
    """

    def __init__(self, history: ClientHistory, tiers: int) -> None:
        self.history = history
        self.tiers = tiers
        self.bounds: Mapping[str, tuple[float, ...]] = {}
        self._speeds: dict[str, list[float]] = {}  # class -> ascending seconds per sample
        self._transfer: dict[str, list[float]] = {}  # class -> ascending seconds per kbit
        self._fast: dict[tuple[str, float, float], float | None] = {}

    def refresh(self, clients: Iterable[tuple[Hashable, Iterable[str]]]) -> None:
        """Recompute from the recent clients, each with the classes it is eligible for."""
        cut = self.begin()
        for client, classes in clients:
            cut.add(client, classes)
        self.finish(cut)

    def begin(self) -> Cut:
        """A cut to feed the recent clients to a slice at a time (a driver that yields between slices)."""
        return Cut(self.history)

    def finish(self, cut: Cut) -> None:
        """Take ``cut``'s clients as the recent ones."""
        for values in (*cut.speeds.values(), *cut.transfer.values()):
            values.sort()
        self.bounds = {key: found for key, values in cut.speeds.items() if (found := tier_bounds(values, self.tiers))}
        self._speeds, self._transfer, self._fast = cut.speeds, cut.transfer, {}

    def speed_tiers(self) -> tuple[float, ...]:
        """The global bounds, over every learned client."""
        return self.history.speed_tiers(self.tiers)

    def fast_task_s(self, key: str, work_samples: float, model_size_kbit: float) -> float | None:
        """Task seconds the fastest tier of class ``key`` stays within
        (:func:`~control_plane.scheduling.history.fast_task_bound`); the global estimate while too few of the
        class are learned."""
        shape = (key, work_samples, model_size_kbit)
        if shape not in self._fast:
            self._fast[shape] = fast_task_bound(self._speeds.get(key, []), self._transfer.get(key, []),
                                                work_samples, model_size_kbit, self.tiers)
        found = self._fast[shape]
        return found if found is not None else self.history.fast_task_s(work_samples, model_size_kbit, self.tiers)
