"""A job's iteration as a sequence of parallelism phases (Photonic Rails / Opus).

Traffic of different parallelism dimensions on a rail comes in phases that do not overlap: pipeline
activations between stages, expert all-to-all, data-parallel gradient sync. Each phase needs only a
low fan-out pattern, which is why one set of optical ports can be time-multiplexed across phases. A
:class:`Phase` says what one phase moves: its collective, its groups (ranks), the bytes per member and
the compute that precedes it. Phases are given explicitly (:class:`PhaseSpec`, from a job file or a
profiled iteration) or derived from parallel degrees and a model (:mod:`propius.fabric.llm_phases`).

Group conventions: a ring collective's group lists its ranks in ring order; a send-recv group is a
directed pair ``(src, dst)``; an all-to-all group lists its members.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Collective", "Phase", "PhaseKind", "PhaseSpec", "RING_COLLECTIVES"]

PhaseKind = Literal["dp", "pp", "ep", "tp", "agg"]


class Collective(StrEnum):
    ALL_REDUCE = "all-reduce"
    ALL_GATHER = "all-gather"
    REDUCE_SCATTER = "reduce-scatter"
    SEND_RECV = "send-recv"
    ALL_TO_ALL = "all-to-all"


RING_COLLECTIVES = frozenset({Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER})
"""Collectives run as rings: on an OCS rail a ring is one cyclic permutation of the members' ports."""


@dataclass(frozen=True)
class Phase:
    """One phase: ``count`` back-to-back collectives of ``bytes`` per member over each group, after
    ``compute_s`` of computation (the gap in which a reconfiguration can hide)."""

    name: str
    kind: PhaseKind
    collective: Collective
    groups: tuple[tuple[int, ...], ...]
    bytes: float
    count: int = 1
    compute_s: float = 0.0

    def ranks(self) -> frozenset[int]:
        return frozenset(r for group in self.groups for r in group)


class PhaseSpec(BaseModel):
    """A phase as a user gives it (job file): validated, then turned into a :class:`Phase`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: PhaseKind
    collective: Collective
    groups: list[list[Annotated[int, Field(ge=0, lt=65_536)]]] = Field(min_length=1, max_length=65_536)
    bytes: Annotated[float, Field(ge=0)]
    count: Annotated[int, Field(ge=1, le=100_000)] = 1
    compute_ms: Annotated[float, Field(ge=0)] = 0.0

    @model_validator(mode="after")
    def _groups(self) -> PhaseSpec:
        seen: set[int] = set()
        for group in self.groups:
            if len(group) < 2 or len(set(group)) != len(group):
                raise ValueError(f"phase {self.name!r}: a group lists at least two distinct ranks, got {group}")
            if self.collective == Collective.SEND_RECV and len(group) != 2:
                raise ValueError(f"phase {self.name!r}: a send-recv group is a pair (src, dst), got {group}")
            if self.collective != Collective.SEND_RECV and seen & set(group):
                raise ValueError(f"phase {self.name!r}: rank {min(seen & set(group))} is in two groups")
            seen |= set(group)
        return self

    def phase(self) -> Phase:
        return Phase(self.name, self.kind, self.collective, tuple(tuple(g) for g in self.groups), self.bytes,
                     self.count, self.compute_ms / 1e3)
