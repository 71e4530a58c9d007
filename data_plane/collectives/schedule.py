"""StragglAR schedules: an AllReduce that uses a straggler's delay, as rounds of point-to-point transfers.

While one member (the straggler, logical rank ``n-1``) is late, the ``n-1`` ready ranks ReduceScatter among
themselves (a ring over ``n-1`` chunks, ``n-2`` rounds): ready rank ``i`` then holds chunk ``i`` summed over
the ready ranks. Once the straggler arrives, the completion phase runs: in round ``t < n-1`` the straggler
and rank ``t`` swap chunk ``t`` and both add, so chunk ``t`` is complete at two places; every complete chunk
is then copied to the ranks that lack it, each holder feeding one non-holder per round, so its holders
roughly double each round. The last chunk completes in round ``n-2``; about ``log2 n`` more rounds finish
the copies, ``n - 2 + ceil(log2 n)`` rounds in all when every doubling fits (the paper's bound).

The completion rounds are synthesised greedily, round by round: the straggler swap of the round is fixed,
then chunks are served in a priority order, each free holder sending to a free rank that lacks the chunk.
Two orders are tried and the shorter schedule kept. A per-round greedy does not see that the last
chunks' doublings need whole rounds of free ranks, so beyond ``n = 6`` it reaches the bound
(:func:`round_bound`) only for some ``n``; :attr:`Schedule.completion_rounds` reports what was reached.

A transfer either reduces (the receiver adds what it gets to its chunk) or copies (it overwrites its chunk);
transfers of one round read the state at the round's start, so a swap is two reducing transfers.
:func:`check_schedule` replays a schedule on contributor sets and names the first violation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

import numpy as np

__all__ = [
    "Op",
    "Schedule",
    "ScheduleError",
    "Transfer",
    "check_schedule",
    "ring_reduce_scatter",
    "round_bound",
    "stragglar_schedule",
]


class Op(StrEnum):
    REDUCE = "reduce"
    COPY = "copy"


@dataclass(frozen=True)
class Transfer:
    """``src`` sends its chunk ``chunk`` to ``dst``, which adds it (``REDUCE``) or keeps it (``COPY``)."""

    src: int
    dst: int
    chunk: int
    op: Op = Op.COPY


Round = tuple[Transfer, ...]


@dataclass(frozen=True)
class Schedule:
    """A StragglAR AllReduce over ``n`` ranks and ``n-1`` chunks; the straggler is rank ``n-1``.

    ``prephase`` runs among the ready ranks during the straggler's delay; ``completion`` once it arrives."""

    n: int
    prephase: tuple[Round, ...]
    completion: tuple[Round, ...]

    @property
    def chunks(self) -> int:
        return self.n - 1

    @property
    def straggler(self) -> int:
        return self.n - 1

    @property
    def completion_rounds(self) -> int:
        return len(self.completion)

    @property
    def rounds(self) -> tuple[Round, ...]:
        return self.prephase + self.completion


class ScheduleError(ValueError):
    """A schedule is wrong; the message names the round (0 = first round overall) and ranks at fault."""


def round_bound(n: int) -> int:
    """The paper's completion round count ``n - 2 + ceil(log2 n)``."""
    return n - 2 + math.ceil(math.log2(n))


def ring_reduce_scatter(members: int) -> tuple[Round, ...]:
    """Ring ReduceScatter among ranks ``0..members-1`` over ``members`` chunks: rank ``i`` ends with chunk ``i``.

    In step ``k`` rank ``i`` sends chunk ``i-k-1`` to rank ``i+1``, so chunk ``c`` starts at rank ``c+1`` and
    reaches rank ``c`` after ``members-1`` steps, having picked up every contribution once."""
    return tuple(
        tuple(Transfer(i, (i + 1) % members, (i - k - 1) % members, Op.REDUCE) for i in range(members))
        for k in range(members - 1)
    )


def stragglar_schedule(n: int) -> Schedule:
    """The StragglAR schedule for ``n >= 2`` ranks (cached per ``n``)."""
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    return _schedule(n)


@cache
def _schedule(n: int) -> Schedule:
    prephase = ring_reduce_scatter(n - 1)
    candidates = (_completion(n, youngest_first) for youngest_first in (True, False))
    return Schedule(n, prephase, min(candidates, key=len))


def _completion(n: int, youngest_first: bool) -> tuple[Round, ...]:
    """Greedy completion rounds: chunks with the fewest holders first (ties: the later chunk first), or the
    later chunk first outright; senders and receivers holding the fewest chunks first."""
    chunks = n - 1
    straggler = n - 1
    held = np.zeros((n, chunks), dtype=bool)  # held[r, c]: rank r holds chunk c fully reduced
    rounds: list[Round] = []
    t = 0
    while not held.all():
        transfers: list[Transfer] = []
        sending = np.zeros(n, dtype=bool)
        receiving = np.zeros(n, dtype=bool)
        if t < chunks:
            transfers += [Transfer(straggler, t, t, Op.REDUCE), Transfer(t, straggler, t, Op.REDUCE)]
            sending[[t, straggler]] = receiving[[t, straggler]] = True
        holders = held.sum(axis=0)
        count = held.sum(axis=1)
        active = [c for c in range(chunks) if 0 < holders[c] < n]
        active.sort(key=lambda c: (holders[c] if youngest_first else 0, -c))  # noqa: B023 (used at once)
        for c in active:
            senders = np.flatnonzero(held[:, c] & ~sending)
            takers = np.flatnonzero(~held[:, c] & ~receiving)
            senders = senders[np.argsort(count[senders], kind="stable")]
            takers = takers[np.argsort(count[takers], kind="stable")]
            for src, dst in zip(senders.tolist(), takers.tolist(), strict=False):
                transfers.append(Transfer(src, dst, c, Op.COPY))
                sending[src] = receiving[dst] = True
        for tr in transfers:  # a round reads the state at its start: a swap completes the chunk at both ends
            if tr.op is Op.REDUCE or held[tr.src, tr.chunk]:
                held[tr.dst, tr.chunk] = True
        rounds.append(tuple(transfers))
        t += 1
    return tuple(rounds)


def check_schedule(schedule: Schedule) -> None:
    """Replay ``schedule`` on contributor sets; raise :class:`ScheduleError` at the first violation.

    Every rank starts with its own contribution in every chunk. A reduce adds the sender's contributors to
    the receiver's (they must be disjoint: overlap would count a contribution twice); a copy replaces them.
    The prephase may involve only ready ranks. In each round no rank sends twice or receives twice. At the
    end every rank holds all ``n`` contributions in every chunk."""
    n, chunks = schedule.n, schedule.chunks
    everyone = frozenset(range(n))
    state = [[frozenset({r}) for _ in range(chunks)] for r in range(n)]
    for index, transfers in enumerate(schedule.rounds):
        where = f"round {index}"
        senders = [tr.src for tr in transfers]
        receivers = [tr.dst for tr in transfers]
        for role, ranks in (("sends", senders), ("receives", receivers)):
            twice = sorted({r for r in ranks if ranks.count(r) > 1})
            if twice:
                raise ScheduleError(f"{where}: rank {twice[0]} {role} twice")
        before = [list(row) for row in state]
        for tr in transfers:
            if not (0 <= tr.src < n and 0 <= tr.dst < n and tr.src != tr.dst and 0 <= tr.chunk < chunks):
                raise ScheduleError(f"{where}: transfer {tr} is out of range")
            if index < len(schedule.prephase) and schedule.straggler in (tr.src, tr.dst):
                raise ScheduleError(f"{where}: the straggler (rank {schedule.straggler}) is in the prephase")
            sent = before[tr.src][tr.chunk]
            if tr.op is Op.REDUCE:
                mine = before[tr.dst][tr.chunk]
                if mine & sent:
                    raise ScheduleError(f"{where}: rank {tr.dst} would count {sorted(mine & sent)} twice "
                                        f"in chunk {tr.chunk}")
                state[tr.dst][tr.chunk] = mine | sent
            else:
                state[tr.dst][tr.chunk] = sent
    for r in range(n):
        for c in range(chunks):
            if state[r][c] != everyone:
                missing = sorted(everyone - state[r][c])
                raise ScheduleError(f"end: rank {r} lacks contributions {missing} in chunk {c}")
