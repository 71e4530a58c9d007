"""What a job asks of the cloud: a number of accelerators, optionally a torus slice shape and parallel
degrees, or an aggregation tier of N shards (N accelerators on one ring).

Standalone so that the job spec, the placement plug-ins and the benchmarks share one definition.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CloudRequest", "Parallelism"]

Degree = Annotated[int, Field(ge=1)]


class Parallelism(BaseModel):
    """Parallel degrees; rank = (pp · dp + d) · tp + t, so a TP group is ``tp`` consecutive ranks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: Degree = 1
    dp: Degree = 1
    pp: Degree = 1

    @property
    def size(self) -> int:
        return self.tp * self.dp * self.pp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(t, d, p) of a rank."""
        return rank % self.tp, (rank // self.tp) % self.dp, rank // (self.tp * self.dp)

    def groups(self) -> dict[str, list[list[int]]]:
        """The communication groups by kind ("tp", "dp", "pp"), each a list of ranks in ring order."""
        ranks = range(self.size)
        out: dict[str, list[list[int]]] = {}
        for kind, axis in (("tp", 0), ("dp", 1), ("pp", 2)):
            keyed: dict[tuple[int, ...], list[int]] = {}
            for rank in ranks:
                c = self.coords(rank)
                keyed.setdefault(tuple(v for i, v in enumerate(c) if i != axis), []).append(rank)
            out[kind] = [g for g in keyed.values() if len(g) > 1]
        return out


class CloudRequest(BaseModel):
    """A request for accelerators: ``count``, or ``shards`` (an aggregation tier, one ring of N shards).

    ``shape`` (a torus slice, x × y × z) and ``parallel`` (TP/DP/PP) are optional and, when given,
    must multiply to the count. Without ``parallel`` the job is pure data parallelism over the count.
    ``preemptible``: the job may run on racks' spares when free accelerators do not suffice, and is
    preempted (released and queued again) when a failure reclaims such a spare.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: Annotated[int, Field(ge=1)] | None = None
    shards: Annotated[int, Field(ge=1)] | None = None
    shape: tuple[Degree, Degree, Degree] | None = None
    parallel: Parallelism | None = None
    preemptible: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> CloudRequest:
        if (self.count is None) == (self.shards is None):
            raise ValueError("give exactly one of 'count' (accelerators) or 'shards' (an aggregation tier)")
        n = self.accelerators
        if self.shape is not None and math.prod(self.shape) != n:
            raise ValueError(f"shape {'x'.join(map(str, self.shape))} holds {math.prod(self.shape)} accelerators, "
                             f"not {n}")
        if self.parallel is not None and self.parallel.size != n:
            p = self.parallel
            raise ValueError(f"parallel tp={p.tp} x dp={p.dp} x pp={p.pp} = {p.size}, not {n} accelerators")
        return self

    @property
    def accelerators(self) -> int:
        return self.count if self.count is not None else self.shards  # type: ignore[return-value]

    @property
    def degrees(self) -> Parallelism:
        """The parallel degrees, pure DP over the count when none were given (a shard tier is one ring)."""
        return self.parallel or Parallelism(dp=self.accelerators)
