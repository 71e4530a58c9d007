"""Discrete-event simulation of jobs running their Opus plans on shared OCS rails.

Every rank runs its program: for each step it takes part in, compute (the phase's compute, times a
seeded jitter), then the collective of its group, which starts when every member is ready and, on
OCS, holds an acknowledgement for the step's configuration. Config requests and acknowledgements
each take ``control_s``; the job's :class:`~propius.fabric.ocs_controller.OcsController` applies the
safety barrier and reprograms the rails (``r`` each switch). Modes: ``ideal`` (an always-connected
fabric, no controller), ``on-demand`` (a rank asks when it reaches a phase) and ``speculative`` (a
rank asks right after its last collective on the current circuits, so switching overlaps compute).

Independently of the controller, the simulator keeps a registry of circuits carrying a transfer and
records a *violation* if a switch tears one of them down, or a transfer starts on a circuit that is not
up. The property tests assert that there are none.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from propius.fabric.ocs_controller import Ack, OcsController, Reconfigure
from propius.fabric.opus import Plan, Step
from propius.fabric.state import FabricState, OcsCircuit

__all__ = ["JobRun", "SimResult", "simulate"]

SimMode = Literal["ideal", "on-demand", "speculative"]


@dataclass(frozen=True)
class JobRun:
    """A job to simulate: ``plan`` (for ``ideal``, an always-connected plan), ``iterations`` of it."""

    job: str
    plan: Plan
    mode: SimMode
    iterations: int = 4


@dataclass
class SimResult:
    iteration_ends: dict[str, list[float]] = field(default_factory=dict)
    reconfigurations: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)

    def iteration_s(self, job: str) -> float:
        """Mean steady-state iteration time: from the end of the first iteration to the end of the last."""
        ends = self.iteration_ends[job]
        return (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else ends[0]


@dataclass(frozen=True)
class _Entry:
    step: int  # global step (iteration × steps + step)
    group: int
    compute_s: float
    instance: int | None  # configuration instance the step's circuits belong to, None without circuits


class _Job:
    """Static program of one job: per rank its entries, per global step its groups and instance."""

    def __init__(self, run: JobRun) -> None:
        plan = run.plan
        self.run, self.plan, n_steps = run, plan, len(plan.steps)
        self.total = n_steps * run.iterations
        self.instance_of: list[int | None] = []
        self.instances: list[frozenset[OcsCircuit]] = []
        prev = None
        for g in range(self.total):
            s = g % n_steps
            if not plan.steps[s].circuits:
                self.instance_of.append(None)
                continue
            config = plan.config_of[s]
            if config != prev:
                self.instances.append(plan.configs[config].circuits)
                prev = config
            self.instance_of.append(len(self.instances) - 1)
        self.programs: dict[int, list[_Entry]] = {r: [] for r in range(len(plan.ranks))}
        carry = Counter[int]()
        for g in range(self.total):
            step = plan.steps[g % n_steps]
            member = {r: k for k, group in enumerate(step.phase.groups) for r in group}
            for rank, program in self.programs.items():
                if rank not in member:
                    carry[rank] += step.phase.compute_s
                    continue
                program.append(_Entry(g, member[rank], step.phase.compute_s + carry.pop(rank, 0.0),
                                      self.instance_of[g]))
        # per rank and program position: the next instance it will use from there (len(instances): none)
        self.upcoming: dict[int, list[int]] = {}
        for rank, program in self.programs.items():
            nxt, out = len(self.instances), []
            for e in reversed(program):
                nxt = e.instance if e.instance is not None else nxt
                out.append(nxt)
            self.upcoming[rank] = [*reversed(out), len(self.instances)]

    def step(self, g: int) -> Step:
        return self.plan.steps[g % len(self.plan.steps)]


def simulate(state: FabricState, runs: Sequence[JobRun], *, control_s: float = 0.0005, jitter: float = 0.0,
             seed: int = 0, barrier: bool = True) -> SimResult:
    """Run the jobs together on ``state`` (each must hold its allocation there) and measure them.

    ``jitter`` stretches each compute by a factor in ``[1, 1 + jitter)``, drawn per (job, rank) from
    ``seed`` in the rank's program order, so that two modes of one job see the same draws.
    """
    sim = _Sim(state, control_s, jitter, seed, barrier)
    for run in runs:
        sim.add(run)
    sim.loop()
    return sim.result


class _Sim:
    def __init__(self, state: FabricState, control_s: float, jitter: float, seed: int, barrier: bool) -> None:
        self.state, self.control_s, self.jitter, self.seed, self.barrier = state, control_s, jitter, seed, barrier
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.counter = itertools.count()
        self.result = SimResult()
        self.in_flight: Counter[OcsCircuit] = Counter()
        self.switching: set[OcsCircuit] = set()
        self.jobs: dict[str, _Job] = {}
        self.controllers: dict[str, OcsController] = {}
        self.pos: dict[tuple[str, int], int] = {}
        self.acked: dict[tuple[str, int], int] = {}
        self.asked: dict[tuple[str, int], int] = {}
        self.released: dict[tuple[str, int], int] = {}
        self.rngs: dict[tuple[str, int], random.Random] = {}
        self.computed: set[tuple[str, int, int]] = set()
        self.ready: dict[tuple[str, int, int], set[int]] = {}
        self.joined: set[tuple[str, int, int]] = set()  # (job, rank, step): the rank is ready for, or in, that step
        self.iter_end: dict[str, list[float]] = {}

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, next(self.counter), fn))

    def add(self, run: JobRun) -> None:
        job = _Job(run)
        self.jobs[run.job] = job
        self.iter_end[run.job] = [0.0] * run.iterations
        if run.mode != "ideal" and job.instances:
            ranks = job.plan.ranks
            port_rank = {(rail.id, port): ranks.index(acc) for rail in self.state.fabric.rails
                         for port, acc in rail.ports.items() if acc in ranks}
            self.state.reconfigure(run.job, job.instances[0])  # installed with the allocation
            ctl = OcsController(run.job, self.state, job.instances, port_rank, run.plan.reconfig_s, self.barrier)
            for rank in job.programs:
                ctl.check_in(rank)
            self.controllers[run.job] = ctl
        for rank in job.programs:
            self.acked[(run.job, rank)] = 0
            self.asked[(run.job, rank)] = 0
            self.released[(run.job, rank)] = 0
            self.pos[(run.job, rank)] = 0
            self.rngs[(run.job, rank)] = random.Random(f"{self.seed}:{run.job}:{rank}")
            self.at(0.0, lambda j=run.job, r=rank: self.begin(j, r))

    def loop(self) -> None:
        while self.heap:
            self.now, _, fn = heapq.heappop(self.heap)
            fn()
        for name, job in self.jobs.items():
            self.result.iteration_ends[name] = self.iter_end[name]
            done = [self.pos[(name, r)] >= len(p) for r, p in job.programs.items()]
            if not all(done):
                self.result.unfinished.append(name)
            if name in self.controllers:
                self.result.reconfigurations[name] = self.controllers[name].reconfigurations

    # ---- ranks ----
    def entry(self, job: str, rank: int) -> _Entry | None:
        program = self.jobs[job].programs[rank]
        k = self.pos[(job, rank)]
        return program[k] if k < len(program) else None

    def begin(self, job: str, rank: int) -> None:
        """The rank's previous collective is over: maybe ask early, then compute toward the next step."""
        entry = self.entry(job, rank)
        self.release(job, rank)
        if entry is None:
            return
        factor = 1.0
        if self.jitter:  # each rank draws in its own program order: the same draws in every mode
            factor += self.rngs[(job, rank)].random() * self.jitter
        self.at(self.now + entry.compute_s * factor, lambda: self.computed_step(job, rank, entry))

    def computed_step(self, job: str, rank: int, entry: _Entry) -> None:
        self.computed.add((job, rank, entry.step))
        if entry.instance is not None and self.jobs[job].run.mode == "on-demand":
            self.ask(job, rank, entry.instance)
        self.try_ready(job, rank)

    def release(self, job: str, rank: int) -> None:
        """Release the circuits this rank no longer needs; speculatively, ask for the next ones too."""
        if job not in self.controllers:
            return
        jb = self.jobs[job]
        upcoming = jb.upcoming[rank][self.pos[(job, rank)]]
        if upcoming <= self.released[(job, rank)]:
            return
        self.released[(job, rank)] = upcoming
        ctl = self.controllers[job]
        if jb.run.mode == "speculative" and upcoming < len(jb.instances):
            self.ask(job, rank, upcoming)
        else:
            self.at(self.now + self.control_s, lambda: self.apply(job, ctl.release(rank, upcoming)))

    def ask(self, job: str, rank: int, instance: int) -> None:
        if job not in self.controllers or instance <= self.asked[(job, rank)]:
            return
        self.asked[(job, rank)] = instance
        self.at(self.now + self.control_s, lambda: self.apply(job, self.controllers[job].request(rank, instance)))

    def try_ready(self, job: str, rank: int) -> None:
        entry = self.entry(job, rank)
        if entry is None or (job, rank, entry.step) not in self.computed:
            return
        if entry.instance is not None and job in self.controllers and self.acked[(job, rank)] < entry.instance:
            return
        if (job, rank, entry.step) in self.joined:  # a late ack: the rank is in this collective already
            return
        self.joined.add((job, rank, entry.step))
        key = (job, entry.step, entry.group)
        members = self.jobs[job].step(entry.step).phase.groups[entry.group]
        ready = self.ready.setdefault(key, set())
        ready.add(rank)
        if len(ready) == len(set(members)):
            del self.ready[key]
            self.start(job, entry)

    # ---- collectives ----
    def start(self, job: str, entry: _Entry) -> None:
        step = self.jobs[job].step(entry.step)
        circuits = step.group_circuits[entry.group] if job in self.controllers else frozenset()
        for c in circuits:
            if self.state.circuits(c.rail).get(c.tx) != c.rx or c in self.switching:
                self.result.violations.append(f"t={self.now:.6f} {job} {step.phase.name}: transfer on {c}, not up")
        self.in_flight.update(circuits)
        self.at(self.now + step.group_seconds[entry.group], lambda: self.finish(job, entry, circuits))

    def finish(self, job: str, entry: _Entry, circuits: frozenset[OcsCircuit]) -> None:
        self.in_flight.subtract(circuits)
        plan_steps = len(self.jobs[job].plan.steps)
        it = entry.step // plan_steps
        self.iter_end[job][it] = max(self.iter_end[job][it], self.now)
        for rank in sorted(set(self.jobs[job].step(entry.step).phase.groups[entry.group])):
            self.pos[(job, rank)] += 1
            self.begin(job, rank)

    # ---- controller ----
    def apply(self, job: str, actions: list[Ack | Reconfigure]) -> None:
        for action in actions:
            if isinstance(action, Ack):
                self.at(self.now + self.control_s, lambda a=action: self.acked_at(job, a))
                continue
            torn = [c for c in action.removed if self.in_flight[c] > 0]
            self.result.violations.extend(f"t={self.now:.6f} {job}: tore down {c} during a transfer" for c in torn)
            self.switching |= action.added
            self.at(self.now + action.seconds, lambda a=action: self.switched(job, a))

    def switched(self, job: str, action: Reconfigure) -> None:
        self.switching -= action.added
        self.apply(job, self.controllers[job].reconfigured())

    def acked_at(self, job: str, ack: Ack) -> None:
        key = (job, ack.rank)
        self.acked[key] = max(self.acked[key], ack.instance)
        self.try_ready(job, ack.rank)
