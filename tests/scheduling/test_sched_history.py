from __future__ import annotations

import pytest

from control_plane.scheduling.history import ClientHistory


def test_speed_bandwidth_and_reliability_are_learned() -> None:
    history = ClientHistory(prior_weight=2.0)
    assert history.estimate("c").reliability == pytest.approx(0.5)  # no observations: (0 + 1) / (0 + 2)
    history.delivered("c", fetch_s=10.0, train_s=60.0, work_samples=1200.0, model_size_kbit=50_000.0)
    estimate = history.estimate("c")
    assert estimate.bandwidth_kbps == pytest.approx(5000.0)
    assert estimate.s_per_sample == pytest.approx(0.05)
    # population rate (1 + 1) / (1 + 2) = 2/3; client: (1 + 2 x 2/3) / (1 + 2) = 7/9
    assert estimate.reliability == pytest.approx(7 / 9)
    history.missed("c", elapsed_s=200.0, work_samples=1200.0, model_size_kbit=50_000.0)
    # still running after 200 s: at least (200 - 2 x 10) / 1200 = 0.15 s per sample pass
    assert history.estimate("c").s_per_sample == pytest.approx(0.15)


def test_a_task_left_unfinished_is_a_floor_until_one_of_its_shape_is_delivered() -> None:
    history = ClientHistory()
    history.unfinished("slow", elapsed_s=90.0, work_samples=600.0, model_size_kbit=800.0)
    estimate = history.estimate("slow")
    assert estimate.unfinished == (90.0, 600.0, 800.0)
    assert (estimate.s_per_sample, estimate.bandwidth_kbps) == (None, None)  # a floor, not a speed
    assert estimate.reliability == history.estimate("new").reliability  # a straggler released at a close: no miss
    history.delivered("slow", fetch_s=5.0, train_s=60.0, work_samples=300.0, model_size_kbit=800.0)
    assert history.estimate("slow").unfinished == (90.0, 600.0, 800.0)  # a lighter task proves nothing
    history.unfinished("slow", elapsed_s=0.0, work_samples=600.0, model_size_kbit=800.0)  # no time: no fact
    assert history.estimate("slow").unfinished == (90.0, 600.0, 800.0)
    history.delivered("slow", fetch_s=5.0, train_s=80.0, work_samples=600.0, model_size_kbit=800.0)
    assert history.estimate("slow").unfinished is None


def test_sessions_and_tiers() -> None:
    history = ClientHistory(session_smoothing=0.5)
    history.session_started("c", 0.0)
    history.session_ended("c", 100.0)
    history.session_started("c", 1000.0)
    history.session_ended("c", 1300.0)  # 100 + 0.5 x (300 - 100) = 200
    history.session_started("c", 2000.0)
    estimate = history.estimate("c")
    assert estimate.session_s == pytest.approx(200.0)
    assert estimate.available_for_s(2050.0) == pytest.approx(150.0)
    for i, speed in enumerate([0.01, 0.02, 0.03, 0.04, 0.05, 0.06]):
        history.delivered(i, fetch_s=1.0, train_s=speed * 100, work_samples=100.0, model_size_kbit=1.0)
    assert history.speed_tiers(3) == pytest.approx((0.03, 0.05))


def test_fast_task_s_is_the_fastest_tiers_bound_by_task_time() -> None:
    history = ClientHistory()
    assert history.fast_task_s(100.0, 1000.0, 3) is None  # nothing learned yet
    for client in range(64):  # speeds 0.01 ... 0.64 s per sample pass; every link 1,000 kbit/s
        history.delivered(client, 1.0, (client + 1) * 0.01 * 100.0, 100.0, 1000.0)
    # One link speed: the task-time quantiles are the speed quantiles shifted by the 2 s of transfers.
    # Grid of 32 x 32 sums, index 1024 // 3 = 341 -> speed quantile 341 // 32 = 10 -> speeds[21] = 0.22.
    assert history.fast_task_s(100.0, 1000.0, 3) == pytest.approx(100.0 * 0.22 + 2.0 * 1000.0 / 1000.0)
    assert history.fast_task_s(100.0, 1000.0, 1) is None
    history.forget(0)
    assert history.fast_task_s(100.0, 1000.0, 3) == pytest.approx(24.0)  # cached: one change of 64
