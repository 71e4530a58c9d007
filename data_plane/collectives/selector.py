"""Per-round AllReduce algorithm choice for a group with a possible persistent straggler.

:class:`StragglerTracker` watches a group's arrivals: each member's lag behind the ``n-1``-th arrival (zero
for all but the last), an EWMA of it, and over the last ``window`` rounds the lags of the member that was
last most often and how often it was (its persistence). :class:`Selector` predicts Ring, RHD and StragglAR
times with the α-β model (:mod:`data_plane.collectives.cost`), the delay taken as a low quantile of the
persistent member's lags (conservative: a smaller delay hides less of the ReduceScatter), and picks
StragglAR only when it beats the best of the others by ``margin``, the straggler is persistent, and the
path is not an optical-circuit one. :meth:`Selector.form_group` binds the persistent straggler to the last
logical rank, the one the schedule waits for.

A wrong guess (another member turns out last) costs at most one ReduceScatter against the best other
algorithm: the ready ranks' ReduceScatter then waits for the real straggler, so StragglAR takes
``T_RS(n-1) + T_completion`` from its arrival, and the selector chose StragglAR only where
``T_completion`` is below the best other algorithm's time.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from data_plane.collectives import cost
from data_plane.collectives.cost import LinkCost

__all__ = ["Algorithm", "Choice", "Selector", "StragglerTracker"]


class Algorithm(StrEnum):
    RING = "ring"
    RHD = "rhd"
    STRAGGLAR = "stragglar"


@dataclass
class StragglerTracker:
    """Arrival statistics of one group; ``alpha`` is the EWMA weight of the newest round."""

    window: int = 32
    alpha: float = 0.2
    ewma: dict[Hashable, float] = field(default_factory=dict)
    _last: deque[Hashable] = field(init=False)
    _lags: deque[tuple[Hashable, float]] = field(init=False)

    def __post_init__(self) -> None:
        self._last = deque(maxlen=self.window)
        self._lags = deque(maxlen=self.window)

    def observe(self, arrivals: Mapping[Hashable, float]) -> None:
        """One round's arrival times (seconds, any common clock) of every member (at least two)."""
        if len(arrivals) < 2:
            raise ValueError("a round needs at least two arrivals")
        order = sorted(arrivals, key=arrivals.__getitem__)
        reference = arrivals[order[-2]]
        for member, at in arrivals.items():
            lag = max(0.0, at - reference)
            self.ewma[member] = self.alpha * lag + (1 - self.alpha) * self.ewma.get(member, lag)
        self._last.append(order[-1])
        self._lags.append((order[-1], arrivals[order[-1]] - reference))

    @property
    def persistent_member(self) -> Hashable | None:
        """The member last most often over the window (``None`` before any round)."""
        return Counter(self._last).most_common(1)[0][0] if self._last else None

    @property
    def persistence(self) -> float:
        """The share of the window's rounds in which :attr:`persistent_member` was last."""
        return Counter(self._last).most_common(1)[0][1] / len(self._last) if self._last else 0.0

    def predicted_delay(self, quantile: float = 0.25) -> float:
        """A quantile of the persistent member's delay behind the ``n-1``-th arrival over the window, counting
        rounds where it was not last as zero delay."""
        member = self.persistent_member
        if member is None:
            return 0.0
        lags = [lag if who == member else 0.0 for who, lag in self._lags]
        return float(np.quantile(lags, quantile))


@dataclass(frozen=True)
class Choice:
    algorithm: Algorithm
    predicted_s: dict[Algorithm, float]
    delay_s: float


@dataclass(frozen=True)
class Selector:
    """``margin``: StragglAR must be at least this fraction faster than the best other algorithm;
    ``min_persistence``: the straggler must have been last in at least this share of recent rounds."""

    margin: float = 0.1
    min_persistence: float = 0.75
    quantile: float = 0.25

    def form_group(self, members: Sequence[Hashable], tracker: StragglerTracker) -> list[Hashable]:
        """The logical rank order of a group: the persistent straggler (if persistent enough) last."""
        straggler = tracker.persistent_member
        if straggler in members and tracker.persistence >= self.min_persistence:
            return [m for m in members if m != straggler] + [straggler]
        return list(members)

    def choose(self, n: int, size: float, link: LinkCost, tracker: StragglerTracker,
               rounds: int | None = None) -> Choice:
        """The algorithm for the next round of an ``n``-member group AllReducing ``size`` bytes over ``link``;
        ``rounds``: the StragglAR schedule's completion rounds (default the paper's bound)."""
        delay = tracker.predicted_delay(self.quantile)
        predicted = {Algorithm.RING: cost.ring(n, size, link), Algorithm.RHD: cost.rhd(n, size, link)}
        best = min(predicted, key=predicted.__getitem__)
        if n >= 3:
            predicted[Algorithm.STRAGGLAR] = cost.stragglar(n, size, link, delay, rounds)
        eligible = (Algorithm.STRAGGLAR in predicted and not link.ocs
                    and tracker.persistence >= self.min_persistence
                    and predicted[Algorithm.STRAGGLAR] <= (1 - self.margin) * predicted[best])
        return Choice(Algorithm.STRAGGLAR if eligible else best, predicted, delay)
