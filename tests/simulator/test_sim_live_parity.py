"""The simulator and the live control plane decide the same: same views, same order, same offers."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

from control_plane.scheduler import SchedulerView
from control_plane.scheduling.matching import offer_candidates, supply_by_class
from control_plane.scheduling.state import RoundState
from policies import JobView, load_policy
from propius.config import Settings
from propius.simulator import PopulationModel, SimConfig, Simulation, Workload, make_population
from propius.specs import ClientProfile


class FakeHot:
    """The HotState reads SchedulerView makes, answered from fixed round states and recent profiles."""

    def __init__(self, states: dict[str, RoundState], profiles: dict[int, str] | None = None) -> None:
        self._states = states
        self._profiles = profiles or {}

    async def rounds(self, job_ids: list[str]) -> dict[str, RoundState]:
        return {job_id: self._states[job_id] for job_id in job_ids if job_id in self._states}

    async def forget_clients_before(self, since: float) -> None:
        return None

    async def recent_profiles_raw(self, since: float) -> AsyncIterator[list[tuple[int, str]]]:  # sim indices
        yield list(self._profiles.items())


class FakeJobs:
    def __init__(self, jobs: list) -> None:
        self._jobs = jobs

    def active(self) -> list:
        return self._jobs

    def cached(self, job_id: str):  # noqa: ANN201
        return next((job for job in self._jobs if job.job_id == job_id), None)


def _mid_run(tiny: Workload, day: PopulationModel, policy: str) -> Simulation:
    sim = Simulation(tiny, make_population(400, 2, day), load_policy(policy), SimConfig(seed=2))
    sim.run()
    # Re-open every job's round with some binds, as a snapshot in the middle of a run would show.
    for i, job in enumerate(sim.jobs):
        job.open_round(100.0 + i, token=1000 + i)
        job.bound, job.results = 3 * i, i
    sim._dirty = True
    return sim


LIVE = {"work_samples", "execution_timeout_s", "deadline_at", "opened_at"}  # what the live job_view fills too
OBSERVED = {f.name: f.default for f in dataclasses.fields(JobView)
            if f.default is not dataclasses.MISSING and f.name not in LIVE}


def test_views_order_and_offers_match_the_live_snapshot_path(tiny: Workload, day: PopulationModel) -> None:
    for policy_name in ("fifo", "srsf", "las", "fair-share", "irs", "propius"):
        sim = _mid_run(tiny, day, policy_name)
        live = SchedulerView(FakeHot({j.job_id: j.round_state() for j in sim.jobs}),  # type: ignore[arg-type]
                             FakeJobs([j.active for j in sim.jobs]), sim.policy, Settings(), seed=sim.config.seed)  # type: ignore[arg-type]
        live.supply = dict(sim.supply)
        asyncio.run(live.refresh_states())
        snapshot = live.snapshot()
        # The simulator's views are the live job_view plus the observations only it tracks, field by field.
        sim_views = sim.ordered_views()
        plain = [dataclasses.replace(v, **OBSERVED) for v in sim_views]
        assert [v.job_id for v in snapshot.views] == [v.job_id for v in sim_views]
        assert snapshot.views == plain
        ctx = dataclasses.replace(snapshot.ctx, now=sim.now)
        for client in range(0, 400, 7):
            attrs = sim.population.profiles[client]
            live_offers = [v.job_id for v in offer_candidates(attrs, snapshot.views, sim.policy, ctx, 4)]
            assert live_offers == [v.job_id for v in offer_candidates(attrs, plain, sim.policy, ctx, 4)]
            if policy_name in ("fifo", "srsf", "las", "fair-share"):  # these read no observation
                assert live_offers == [v.job_id for v in offer_candidates(attrs, sim_views, sim.policy, ctx, 4)]


def test_both_drivers_cut_the_same_class_speed_tiers(tiny: Workload, day: PopulationModel) -> None:
    """The simulator over its online clients, the live scheduler over the recent ones its supply count reads:
    with the same learned speeds and the same clients, the same per-class tiers reach the policy."""
    sim = _mid_run(tiny, day, "irs")
    sim._tiers_at = -(10**9)  # cut at this refresh
    sim._refresh_supply()
    online = [c for c in range(400) if sim.online[c]]
    profiles = {}
    for c in online:
        attrs = sim.population.profiles[c]
        profiles[c] = ClientProfile(
            device_class=attrs["device_class"],
            numeric={k: v for k, v in attrs.items() if isinstance(v, int | float) and not isinstance(v, bool)},
            labels={k: v for k, v in attrs.items() if isinstance(v, str) and k != "device_class"},
        ).model_dump_json()
    live = SchedulerView(FakeHot({j.job_id: j.round_state() for j in sim.jobs}, profiles),  # type: ignore[arg-type]
                         FakeJobs([j.active for j in sim.jobs]), sim.policy, Settings())  # type: ignore[arg-type]
    live.observations.history = live.observations.tiers.history = sim.history  # what the simulator learned
    asyncio.run(live.estimate_supply(60.0))
    asyncio.run(live.refresh_states())
    assert live.supply == sim.supply
    assert sim.class_tiers.bounds and live.snapshot().ctx.class_speed_tiers == sim.context(0, sim.now).class_speed_tiers


def test_the_live_check_in_uses_the_same_offer_candidates() -> None:
    assert SchedulerView.offers_for.__code__.co_names.count("offer_candidates") == 1


def test_class_masks_agree_with_supply_by_class(tiny: Workload, day: PopulationModel) -> None:
    sim = Simulation(tiny, make_population(400, 5, day), load_policy("fifo"), SimConfig(seed=5))
    classes = {j.key: j.spec.requirements.public for j in sim.jobs}
    online = range(0, 400, 3)
    for c in online:
        sim.online_by_mask[sim.class_mask[c]] = sim.online_by_mask.get(sim.class_mask[c], 0) + 1
    sim._refresh_supply()
    assert sim.supply == supply_by_class((sim.population.profiles[c] for c in online), classes)


def test_views_carry_the_round_open_time_for_the_informed_rules(tiny: Workload, day: PopulationModel) -> None:
    sim = _mid_run(tiny, day, "propius")
    views = {v.job_id: v for v in sim.ordered_views()}
    assert {job.job_id: views[job.job_id].opened_at for job in sim.jobs} == {
        job.job_id: 100.0 + i for i, job in enumerate(sim.jobs)}


def test_only_the_head_gets_fastest_fill_at_and_only_on_request(tiny: Workload, day: PopulationModel) -> None:
    asks = load_policy("propius", wait_for_faster=True)
    sim = Simulation(tiny, make_population(400, 2, day), asks, SimConfig(seed=2))
    sim.run()
    for i, job in enumerate(sim.jobs):  # fresh rounds, nobody bound: every candidate is idle
        job.open_round(sim.now, token=1000 + i)
    sim._dirty = True
    head, *rest = sim.ordered_views()
    job = sim.by_id[head.job_id]
    idle = [c for c in job.served if sim.online[c] and sim.busy[c] < 0]  # online, bound to no round
    assert len(idle) >= job.target  # so the estimate exists
    deliveries = sorted(sim.now + sim.history.estimate(c).task_s(head) for c in idle)  # type: ignore[operator]
    assert head.fastest_fill_at == deliveries[job.target - 1]
    assert all(view.fastest_fill_at is None for view in rest)
    sim.policy = load_policy("propius")
    sim._dirty = True
    assert all(view.fastest_fill_at is None for view in sim.ordered_views())


def test_the_live_snapshot_sets_it_on_the_head_from_the_observations(tiny: Workload, day: PopulationModel) -> None:
    """The wiring; LiveObservations.fastest_fill_at itself is tested on events (tests/control_plane)."""
    sim = _mid_run(tiny, day, "propius")
    head_id = sim.ordered_views()[0].job_id
    live = SchedulerView(FakeHot({j.job_id: j.round_state() for j in sim.jobs}),  # type: ignore[arg-type]
                         FakeJobs([j.active for j in sim.jobs]), load_policy("propius", wait_for_faster=True),
                         Settings())  # type: ignore[arg-type]
    live.supply = dict(sim.supply)
    asked = []

    def estimate(view: JobView, views: list[JobView], online: object, now: float) -> float:
        asked.append(view.job_id)
        return 42.0

    live.observations.fastest_fill_at = estimate  # type: ignore[method-assign]
    asyncio.run(live.refresh_states())
    first, *rest = live.snapshot().views
    assert (first.job_id, first.fastest_fill_at, asked) == (head_id, 42.0, [head_id])
    assert all(view.fastest_fill_at is None for view in rest)
    live.supply = dict(sim.supply)  # a change: the snapshot is rebuilt, the estimate reused for 5 s
    assert live.snapshot().views[0].fastest_fill_at == 42.0 and asked == [head_id]
