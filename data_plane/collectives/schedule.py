"""StragglAR schedules: an AllReduce that uses a straggler's delay, as rounds of point-to-point transfers.

While one member (the straggler, logical rank ``n-1``) is late, the ``n-1`` ready ranks ReduceScatter among
themselves (a ring over ``n-1`` chunks, ``n-2`` rounds): ready rank ``i`` then holds chunk ``i`` summed over
the ready ranks. Once the straggler arrives, the completion phase runs: in round ``t < n-1`` the straggler
and rank ``t`` swap chunk ``t`` and both add, so chunk ``t`` is finished (all ``n`` contributions) at both;
finished chunks are then copied on until every rank holds all of them. The paper's bound for this phase is
``n - 2 + ceil(log2 n)`` rounds (:func:`round_bound`): the last chunk is finished in round ``n-2`` and needs
``log2 n - 1`` more rounds of doubling, with the straggler, idle by then, as one more sender.

For a power of two ``n = 2**L`` the bound leaves no slack: between the start-up and the last swap, every
ready rank but the straggler's partner must send one chunk and receive one it lacks in every round. We build
that schedule as a circulant. In round ``r``, ready rank ``x`` has age ``(r - x) mod (n-1)``; age 0 is the
straggler's partner. Each age has a level (:func:`_levels`); the ranks of level ``k`` hold chunk ``r - k``
as their one chunk in flight (finished, not yet everywhere), and level ``k`` has ``2**(k-1)`` ages. Level
``L`` holds the oldest chunk, ``r - L``, and includes age 0. Every other level-``L`` rank pairs with one rank
of a level ``k < L`` and the two trade what they hold: the lower rank gets ``r - L``, which reaches all
``n-1`` ready ranks with this round (``2**(L-1)`` holders plus ``2**(L-1) - 1`` new), and the level-``L``
rank gets ``r - k``, whose holders double, so both sit at level ``k+1`` next round. The level sequence over
the ages says where each level-``L`` age goes next, so the pairing by age is the same in every round.
Rounds before the start reference chunks ``r - k < 0``, which do not exist: those transfers are left out,
and what remains is the doubling start-up. After the last swap the straggler sends the last chunk to the
age-0 rank, and every transfer of a "chunk" past the last carries the last chunk instead, so it spreads to
the union of the levels and arrives everywhere one round before it would by doubling alone.

For other ``n`` such a circulant cannot exist (its holder counts do not add up to a multiple of ``n-1``),
and the bound leaves a little slack (a few receive slots). :func:`_searched` finds those schedules with a
seeded depth-first search over greedy rounds that keeps within the slack; it reaches the bound for many
``n`` and one round over it for the rest (``python benchmarks/straggler.py`` lists them).

A transfer either reduces (the receiver adds what it gets to its chunk) or copies (it overwrites its chunk);
transfers of one round read the state at the round's start, so a swap is two reducing transfers.
:func:`check_schedule` replays a schedule on contributor sets and names the first violation.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

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
    completion = _circulant(n) if n & (n - 1) == 0 else _searched(n)
    return Schedule(n, ring_reduce_scatter(n - 1), completion)


def _levels(n: int) -> tuple[int, ...]:
    """The level of each age for a power of two ``n = 2**L``: ``(L, 1, 2, ..., L)`` (the straggler's partner,
    then its climb after the swap), then runs ``j, j+1, ..., L`` (a rank that picked up a level-``j-1`` chunk
    climbing back to ``L``), ``2**(j-2)`` runs for each ``j = 2..L`` (one run of ``L`` is the first age).
    Level ``k`` then holds ``2**(k-1)`` ages: ``n - 1`` in all."""
    top = n.bit_length() - 1
    if top == 1:
        return (1,)
    levels = [top, *range(1, top + 1)]
    for j in range(2, top + 1):
        for _ in range(2 ** (j - 2) - (j == top)):
            levels += range(j, top + 1)
    return tuple(levels)


def _circulant(n: int) -> tuple[Round, ...]:
    """Completion rounds for a power of two ``n``: ``n - 2 + log2 n`` rounds (see the module docstring)."""
    ready, top = n - 1, n.bit_length() - 1
    levels = _levels(n)
    at = {k: [a for a in range(ready) if levels[a] == k] for k in range(1, top + 1)}
    # a level-top age (not 0) picks up the chunk of level k when the next age is at level k + 1
    picks = {k: [a for a in range(1, ready) if levels[a] == top and levels[(a + 1) % ready] == k + 1]
             for k in range(1, top)}
    pairs = [(k, young, old) for k in range(1, top) for young, old in zip(at[k], picks[k], strict=True)]
    rounds: list[Round] = []
    for r in range(ready + top - 1):
        def rank(age: int) -> int:
            return (r - age) % ready  # noqa: B023 (used within the round)

        if r < ready:
            transfers = [Transfer(n - 1, r, r, Op.REDUCE), Transfer(r, n - 1, r, Op.REDUCE)]
        else:  # the straggler holds every chunk now: it seeds the last one at the age-0 rank
            transfers = [Transfer(n - 1, rank(0), ready - 1)]
        for k, young, old in pairs:
            if r - k >= 0:  # chunks r - k >= n - 1 do not exist: the last chunk stands in for them
                transfers.append(Transfer(rank(young), rank(old), min(r - k, ready - 1)))
            if r - top >= 0:
                transfers.append(Transfer(rank(old), rank(young), r - top))
        rounds.append(tuple(transfers))
    return tuple(rounds)


def _searched(n: int) -> tuple[Round, ...]:
    """Completion rounds for other ``n``: a randomised depth-first search over rounds (seeded, so the same
    every run), aiming at the bound first, then one round more at a time. Each round is built greedily:
    chunks with the fewest holders first; senders holding the fewest chunks in flight first; a young chunk
    to a rank that would otherwise have nothing left to send, and not to the next swap partner (variant 0)
    or the next ``ceil(log2 n) - 1`` (variant 1), which could not pass it on in their swap round. A branch
    is cut when a chunk can no longer reach every rank by doubling, or when more receive slots went unused
    than the target leaves spare (:func:`_spare_receives`)."""
    target = round_bound(n)
    while True:
        for variant in (0, 1):
            found = _Search(n, target, variant).run()
            if found is not None:
                return found
        target += 1


def _spare_receives(n: int, rounds: int) -> int:
    """Receive slots of ready ranks in ``rounds`` completion rounds, less the ``(n-1)(n-2)`` copies needed.
    Round ``t`` has ``n - 2`` free ready ranks while the straggler swaps, ``n - 1`` after; and before round
    ``log2 n`` at most ``2**t - 1`` ranks hold a finished chunk to send."""
    ready = n - 1
    top = math.ceil(math.log2(n))
    slots = 0
    for t in range(rounds):
        free = ready - 1 if t < ready else ready
        slots += min(free, 2**t - 1) if t < top else free
    return slots - ready * (ready - 1)


class _Search:
    """One depth-first search for completion rounds of ``n`` ranks within ``target`` rounds."""

    TRIES = 4  # distinct candidate rounds tried per node

    def __init__(self, n: int, target: int, variant: int) -> None:
        self.n, self.ready, self.target, self.variant = n, n - 1, target, variant
        self.top = math.ceil(math.log2(n))
        self.spare = _spare_receives(n, target)
        self.rng = random.Random(n * 4 + variant)
        self.budget = 2 * target  # nodes: where the bound is found, it takes little backtracking
        self.rounds: list[list[tuple[int, int, int]]] = []

    def run(self) -> tuple[Round, ...] | None:
        if not self._descend(0, [0] * self.n, [0] * self.ready, 0):
            return None
        straggler = self.n - 1
        return tuple(
            tuple([Transfer(straggler, t, t, Op.REDUCE), Transfer(t, straggler, t, Op.REDUCE)] * (t < self.ready)
                  + [Transfer(src, dst, c) for src, dst, c in copies])
            for t, copies in enumerate(self.rounds))

    def _descend(self, t: int, held: list[int], count: list[int], wasted: int) -> bool:
        """``held[r]``: bitmask of the finished chunks rank ``r`` holds; ``count[c]``: ready ranks holding ``c``."""
        if all(c == self.ready for c in count):
            return True
        self.budget -= 1
        if t >= self.target or self.budget < 0 or not self._in_time(t, count):
            return False
        seen: set[tuple[tuple[int, int, int], ...]] = set()
        for _ in range(self.TRIES):
            copies = self._round(t, held, count)
            key = tuple(sorted(copies))
            if key in seen:
                continue
            seen.add(key)
            free = self.ready - 1 if t < self.ready else self.ready
            slots = min(free, 2**t - 1) if t < self.top else free
            if wasted + slots - len(copies) > self.spare:
                continue
            after, counted = list(held), list(count)
            for _src, dst, c in copies:
                after[dst] |= 1 << c
                counted[c] += 1
            if t < self.ready:
                after[t] |= 1 << t
                after[self.n - 1] |= 1 << t
                counted[t] += 1
            self.rounds.append(copies)
            if self._descend(t + 1, after, counted, wasted + slots - len(copies)):
                return True
            self.rounds.pop()
        return False

    def _in_time(self, t: int, count: list[int]) -> bool:
        """Every finished chunk can still reach all ready ranks by doubling (the straggler helps after its swaps)."""
        for c in range(min(t, self.ready)):
            holders, r = count[c], t
            while holders < self.ready and r < self.target:
                holders = 2 * holders + (r >= self.ready)
                r += 1
            if holders < self.ready:
                return False
        return True

    def _round(self, t: int, held: list[int], count: list[int]) -> list[tuple[int, int, int]]:
        ready, straggler = self.ready, self.n - 1
        busy_send = {t, straggler} if t < ready else set()
        busy_recv = set(busy_send)
        done = sum(1 << c for c in range(ready) if count[c] == ready)
        active = [c for c in range(min(t, ready)) if count[c] < ready]
        in_flight = [(held[r] & ~done).bit_count() for r in range(ready)]
        # chunks most ranks hold finish soon; a rank holding no other chunk in flight would have nothing to send
        big = sum(1 << c for c in active if 2 * count[c] > ready)
        idle = [not held[r] & ~done & ~big for r in range(ready)]
        active.sort(key=lambda c: (count[c], -c))
        ahead = 2 if self.variant == 0 else self.top  # upcoming swap partners kept free of young chunks
        copies: list[tuple[int, int, int]] = []
        for c in active:
            bit = 1 << c
            senders = [r for r in range(self.n) if held[r] & bit and r not in busy_send]
            takers = [r for r in range(ready) if not held[r] & bit and r not in busy_recv]
            tie = [self.rng.random() for _ in range(self.n)]  # ties broken at random
            senders.sort(key=lambda r: (in_flight[r] if r < ready else ready, tie[r]))  # noqa: B023
            young = not big & bit
            takers.sort(key=lambda r: (0 < r - t < ahead and young,  # noqa: B023 (used at once)
                                       idle[r] != young, tie[r]))  # noqa: B023
            for src, dst in zip(senders, takers, strict=False):
                busy_send.add(src)
                busy_recv.add(dst)
                copies.append((src, dst, c))
        return copies


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
