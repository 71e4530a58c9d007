"""The lockstep reference plan of ``benchmarks/utilization_bound.py`` on cases small enough to solve by hand."""

from __future__ import annotations

import pytest

from benchmarks.utilization_bound import critical_path_s, lockstep_period, successful_binds


def test_each_client_serves_one_job_when_demand_needs_every_client() -> None:
    # two 10-s clients, one job wanting both: a round lasts as long as one task
    assert lockstep_period([((True,), 10.0), ((True,), 10.0)], [2]) == pytest.approx(10.0, abs=0.1)


def test_a_client_runs_tasks_of_different_jobs_back_to_back() -> None:
    # the only client serves both jobs in one period: two tasks in a row
    assert lockstep_period([((True, True), 10.0)], [1, 1]) == pytest.approx(20.0, abs=0.1)


def test_the_plan_takes_the_cheaper_of_chaining_and_a_slow_client() -> None:
    # job 1 may also take a 30-s client; chaining both jobs on the 10-s client (20 s) is shorter
    tasks = [((True, True), 10.0), ((False, True), 30.0)]
    assert lockstep_period(tasks, [1, 1]) == pytest.approx(20.0, abs=0.1)
    # with a 15-s client instead, job 1 takes it and a round lasts 15 s
    assert lockstep_period([((True, True), 10.0), ((False, True), 15.0)], [1, 1]) == pytest.approx(15.0, abs=0.1)


def test_a_job_with_too_few_eligible_clients_has_no_plan() -> None:
    with pytest.raises(SystemExit, match="infeasible"):
        lockstep_period([((True, False), 10.0)], [1, 1])


def test_the_critical_path_is_the_slowest_jobs_rounds_at_their_demand_th_fastest_client() -> None:
    tasks = [((True, True), 10.0), ((True, True), 20.0), ((False, True), 50.0)]
    # job 0: 3 rounds x its 2nd-fastest (20 s) = 60 s; job 1: 2 rounds x its 3rd-fastest (50 s) = 100 s
    assert critical_path_s(tasks, [2, 3], [3, 2]) == 100.0
    # binds: job 0 targets 3 but has 2 eligible clients (3 rounds x 2), job 1 targets 3 of 3 (2 x 3)
    assert successful_binds(tasks, [3, 3], [3, 2]) == 12
    with pytest.raises(SystemExit, match="infeasible"):
        critical_path_s(tasks, [3, 3], [1, 1])
