"""Learning :class:`~policies.base.ClientEstimate` from what a control plane observes about clients.

Pure bookkeeping (times are passed in, nothing is read from a clock or a store), so the live
control plane and the simulator can feed it the same observations. It learns:

- speed and bandwidth from a delivered task's phases (fetch, train, upload times); a task that
  missed its deadline sets a lower bound on the time per sample pass;
- reliability, the chance that a bound task delivers, as a Beta estimate shrunk towards the
  population's rate, so one unlucky task does not exclude a client;
- a floor on its task time from the last task it was still working on when the round ended (also for a client
  that never delivered, whose speed is unknown: otherwise it would look as promising after every miss);
- sessions: when a client starts checking in and when it stops, smoothed into a typical length.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from policies import ClientEstimate

__all__ = ["GRID", "ClientHistory", "fast_task_bound", "tier_bounds"]

GRID = 32  # quantiles of speed and of transfer time combined into the task-time distribution


def tier_bounds(ordered: Sequence[float], tiers: int) -> tuple[float, ...]:
    """Bounds splitting the ascending ``ordered`` values into ``tiers`` equal-count tiers (lowest first);
    empty with fewer values than tiers."""
    if tiers < 2 or len(ordered) < tiers:
        return ()
    return tuple(ordered[len(ordered) * i // tiers] for i in range(1, tiers))


def fast_task_bound(
    speeds: Sequence[float], transfer: Sequence[float], work_samples: float, model_size_kbit: float, tiers: int,
) -> float | None:
    """Task seconds that the fastest of ``tiers`` equal-count tiers stays within, from ascending seconds per
    sample (``speeds``) and seconds per kbit (``transfer``), taken as independent: ``GRID`` quantiles of each
    give the task-time distribution. None with fewer than ``GRID`` of either."""
    if tiers < 2 or min(len(speeds), len(transfer)) < GRID:
        return None
    speed_q, transfer_q = (
        [values[(2 * i + 1) * len(values) // (2 * GRID)] for i in range(GRID)] for values in (speeds, transfer)
    )
    tasks = sorted(work_samples * s + 2.0 * model_size_kbit * t for s in speed_q for t in transfer_q)
    return tasks[len(tasks) // tiers]


@dataclass(slots=True)
class _Record:
    delivered: int = 0
    missed: int = 0
    s_per_sample: float | None = None
    bandwidth_kbps: float | None = None
    online_since: float | None = None
    session_s: float | None = None
    unfinished: tuple[float, float, float] | None = None  # (seconds, work_samples, model_size_kbit)
    cached: ClientEstimate | None = None


class ClientHistory:
    def __init__(self, prior_weight: float = 2.0, session_smoothing: float = 0.5) -> None:
        self._records: dict[Hashable, _Record] = {}
        self._prior_weight = prior_weight
        self._smoothing = session_smoothing
        self._delivered = 0
        self._missed = 0
        self._speeds: list[float] = []  # sorted learned speeds, for tier bounds
        self._transfer: list[float] = []  # sorted learned seconds per kbit (1 / bandwidth)
        self._changes = 0  # speed and bandwidth updates so far
        self._fast: dict[tuple[float, float, int], tuple[int, float]] = {}  # task shape -> (at change, bound)

    def _record(self, client: Hashable) -> _Record:
        record = self._records.get(client)
        if record is None:
            record = self._records[client] = _Record()
        record.cached = None
        return record

    def session_started(self, client: Hashable, now: float) -> None:
        self._record(client).online_since = now

    def session_ended(self, client: Hashable, now: float) -> None:
        record = self._record(client)
        if record.online_since is None:
            return
        length = now - record.online_since
        previous = record.session_s
        record.session_s = length if previous is None else previous + self._smoothing * (length - previous)
        record.online_since = None

    def delivered(
        self, client: Hashable, fetch_s: float, train_s: float, work_samples: float, model_size_kbit: float
    ) -> None:
        record = self._record(client)
        record.delivered += 1
        self._delivered += 1
        if record.unfinished is not None and record.unfinished[1:] == (work_samples, model_size_kbit):
            record.unfinished = None  # it finished a task of that shape: the floor may be stale
        if fetch_s > 0 and model_size_kbit > 0:
            self._set_bandwidth(record, model_size_kbit / fetch_s)
        if work_samples > 0:
            self._set_speed(record, train_s / work_samples)

    def missed(self, client: Hashable, elapsed_s: float, work_samples: float, model_size_kbit: float) -> None:
        """A bound task that did not deliver: dropped, or still running at the round's deadline."""
        record = self._record(client)
        record.missed += 1
        self._missed += 1
        if record.bandwidth_kbps is not None and work_samples > 0:
            bound = (elapsed_s - 2.0 * model_size_kbit / record.bandwidth_kbps) / work_samples
            if bound > 0 and (record.s_per_sample is None or bound > record.s_per_sample):
                self._set_speed(record, bound)

    def unfinished(self, client: Hashable, elapsed_s: float, work_samples: float, model_size_kbit: float) -> None:
        """A bound task still running when its round ended (closed without it, or failed): the client needs at
        least ``elapsed_s`` for a task of this shape. Kept until a later unfinished task replaces it or the
        client delivers one of the same shape."""
        if elapsed_s > 0:
            self._record(client).unfinished = (elapsed_s, work_samples, model_size_kbit)

    def forget(self, client: Hashable) -> None:
        """Drop what was learned of ``client`` (a control plane bounds its memory this way); counts toward
        the population's reliability stay."""
        record = self._records.pop(client, None)
        if record is not None:
            self._set_speed(record, None)
            self._set_bandwidth(record, None)

    def _set_speed(self, record: _Record, value: float | None) -> None:
        """Keep ``_speeds`` sorted and in step with the records; None forgets the speed."""
        if record.s_per_sample is not None:
            del self._speeds[bisect.bisect_left(self._speeds, record.s_per_sample)]
        record.s_per_sample = value
        if value is not None:
            bisect.insort(self._speeds, value)
        self._changes += 1

    def _set_bandwidth(self, record: _Record, value: float | None) -> None:
        """Keep ``_transfer`` (seconds per kbit) sorted and in step with the records; None forgets it."""
        if record.bandwidth_kbps is not None:
            del self._transfer[bisect.bisect_left(self._transfer, 1.0 / record.bandwidth_kbps)]
        record.bandwidth_kbps = value
        if value is not None:
            bisect.insort(self._transfer, 1.0 / value)
        self._changes += 1

    def population_reliability(self) -> float:
        return (self._delivered + 1.0) / (self._delivered + self._missed + 2.0)

    def estimate(self, client: Hashable) -> ClientEstimate:
        """The client's estimate; cached until its next observation (shrunk to the rate of that time)."""
        record = self._records.get(client)
        if record is None:
            return ClientEstimate(reliability=self.population_reliability())
        if record.cached is None:
            prior = self._prior_weight
            reliability = (record.delivered + prior * self.population_reliability()) / (
                record.delivered + record.missed + prior
            )
            record.cached = ClientEstimate(
                s_per_sample=record.s_per_sample, bandwidth_kbps=record.bandwidth_kbps, reliability=reliability,
                online_since=record.online_since, session_s=record.session_s, unfinished=record.unfinished,
            )
        return record.cached

    def learned(self, client: Hashable) -> tuple[float | None, float | None]:
        """The client's learned seconds per sample pass and seconds per kbit (None where not learned)."""
        record = self._records.get(client)
        if record is None:
            return None, None
        bandwidth = record.bandwidth_kbps
        return record.s_per_sample, None if bandwidth is None else 1.0 / bandwidth

    @property
    def changes(self) -> int:
        """Speed and bandwidth updates so far (a driver recomputes what it derives from them when it moved)."""
        return self._changes

    def speed_tiers(self, tiers: int) -> tuple[float, ...]:
        """Bounds splitting the learned speeds into ``tiers`` equal-count tiers (fastest first)."""
        return tier_bounds(self._speeds, tiers)

    def fast_task_s(self, work_samples: float, model_size_kbit: float, tiers: int) -> float | None:
        """Predicted seconds of a task of this shape that the fastest of ``tiers`` equal-count tiers of
        learned clients stays within (:func:`fast_task_bound`): download and
        upload count as much as training (a fast phone on a slow link is a straggler too).

        Recomputed after every twentieth of the learned clients changed, not per call.
        """
        key = (work_samples, model_size_kbit, tiers)
        cached = self._fast.get(key)
        if cached is not None and self._changes - cached[0] < max(GRID, len(self._speeds) // 20):
            return cached[1]
        bound = fast_task_bound(self._speeds, self._transfer, work_samples, model_size_kbit, tiers)
        if bound is not None:
            self._fast[key] = (self._changes, bound)
        return bound
