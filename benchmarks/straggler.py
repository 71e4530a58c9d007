"""StragglAR: schedules, α-β model, selector, and real gloo processes against gloo's all_reduce.

    python benchmarks/straggler.py [--sizes 4 8] [--numel 1048576] [--repeats 9] [--out FILE]

1. Schedules: our StragglAR schedule for n = 2..64 and 256 passes the contributor-set checker; completion
   rounds reached against the paper's bound ``n - 2 + ceil(log2 n)`` for every n.
2. α-β model with the authors' parameters (α = 3 µs, 450 GiB/s, S = 1 GiB, ReduceScatter hidden): speedup
   of StragglAR over Ring by the closed form (the bound's rounds) and simulated on our schedules' rounds.
3. Break-even delay per link class (against the better of Ring and RHD).
4. Selector: no straggler -> Ring/RHD; a persistent one -> StragglAR; a wrong guess loses at most one
   ReduceScatter.
5. Real processes: gloo on loopback, ``n`` local processes, the last one late by a seeded 4-6x the measured
   ReduceScatter time; time from its arrival to the last rank's finish, StragglAR vs ``dist.all_reduce``,
   the two interleaved repeat by repeat (alternating which goes first); min/median/max and the median of the
   per-repeat ratios.
Writes JSON (default benchmarks/results/straggler.json) and a PNG beside it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from data_plane.collectives import cost
from data_plane.collectives.cost import LinkCost
from data_plane.collectives.gloo import launch
from data_plane.collectives.schedule import check_schedule, round_bound, stragglar_schedule
from data_plane.collectives.selector import Algorithm, Selector, StragglerTracker

GIB = 2**30
PAPER = LinkCost(3e-6, 1 / (450 * GIB))
LINK_CLASSES = {  # name: (link, message bytes)
    "NVSwitch-class (3 us, 450 GiB/s), 1 GiB": (PAPER, GIB),
    "100 Gb/s Ethernet (20 us), 1 GiB": (LinkCost.of(20.0, 100.0), GIB),
    "cross-region (5 ms, 10 Gb/s), 0.5 GiB": (LinkCost.of(5000.0, 10.0), GIB / 2),
}


def schedules() -> list[dict]:
    rows = []
    for n in [*range(2, 65), 256]:
        s = stragglar_schedule(n)
        check_schedule(s)
        rows.append({"n": n, "rounds": s.completion_rounds, "bound": round_bound(n)})
    return rows


def speedups() -> list[dict]:
    rows = []
    for n in (4, 8, 16, 32, 64, 128, 256):
        rounds = stragglar_schedule(n).completion_rounds
        ring = cost.ring(n, GIB, PAPER)
        rows.append({"n": n, "closed_form": ring / cost.stragglar_completion(n, GIB, PAPER),
                     "simulated_on_schedule": ring / cost.stragglar_completion(n, GIB, PAPER, rounds),
                     "rounds": rounds, "bound": round_bound(n)})
    return rows


def break_even() -> dict[str, dict[int, float]]:
    return {name: {n: cost.break_even_delay(n, size, link) for n in (4, 8, 16, 64)}
            for name, (link, size) in LINK_CLASSES.items()}


def selector_cases() -> dict[str, object]:
    n, size, link, sel = 8, GIB, PAPER, Selector()
    t_rs = cost.reduce_scatter(n - 1, size, link)
    quiet = StragglerTracker()
    for k in range(32):
        quiet.observe({m: 1e-6 * ((m + k) % n) for m in range(n)})
    late = StragglerTracker()
    for _ in range(32):
        late.observe({m: (5 * t_rs if m == 3 else 0.0) for m in range(n)})
    choice = sel.choose(n, size, link, late)
    best_other = min(choice.predicted_s[Algorithm.RING], choice.predicted_s[Algorithm.RHD])
    wrong = t_rs + cost.stragglar_completion(n, size, link)  # the real straggler sits in the ReduceScatter
    return {"no_straggler": sel.choose(n, size, link, quiet).algorithm.value,
            "persistent_straggler": choice.algorithm.value,
            "bound_order": sel.form_group(list(range(n)), late),
            "wrong_guess_loss_s": wrong - best_other, "one_reduce_scatter_s": t_rs,
            "over_ocs": sel.choose(n, size, LinkCost(link.alpha_s, link.beta_s_per_byte, ocs=True),
                                   late).algorithm.value}


def real(sizes: list[int], numel: int, repeats: int) -> list[dict]:
    return [launch(n, numel, repeats, seed=n) for n in sizes]


def _stats(values: list[float]) -> str:
    v = sorted(values)
    return f"{v[0] * 1e3:7.2f} {v[len(v) // 2] * 1e3:7.2f} {v[-1] * 1e3:7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--numel", type=int, default=1 << 20, help="float64 elements per rank")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "straggler.json")
    args = parser.parse_args()

    sched = schedules()
    over = [r["n"] for r in sched if r["rounds"] > r["bound"]]
    print("schedules n=2..64 and 256 pass the checker; completion rounds (n:rounds, * = one over the bound):")
    print("  " + " ".join(f"{r['n']}:{r['rounds']}" + "*" * (r["rounds"] - r["bound"]) for r in sched))
    print(f"  at the bound: {len(sched) - len(over)} of {len(sched)}; over it: {over}")
    sp = speedups()
    print(f"\n{'n':>4} {'closed form':>12} {'on schedule':>12} {'rounds/bound':>13}")
    for r in sp:
        print(f"{r['n']:>4} {r['closed_form']:>11.3f}x {r['simulated_on_schedule']:>11.3f}x "
              f"{r['rounds']:>6}/{r['bound']}")
    be = break_even()
    print("\nbreak-even delay (ms) vs the better of Ring/RHD")
    for name, row in be.items():
        print(f"  {name:<42}" + "".join(f" n={n}: {d * 1e3:8.2f}" if math.isfinite(d) else f" n={n}: never"
                                         for n, d in row.items()))
    sel = selector_cases()
    print("\nselector:", sel)
    measured = real(args.sizes, args.numel, args.repeats)
    print(f"\n{'n':>3} {'T_RS ms':>8} {'StragglAR min/med/max ms':>26} {'all_reduce min/med/max ms':>27} "
          f"{'AR/SAR min/med/max':>19} f64-identical f32-max-rel")
    for m in measured:
        sar = [r["stragglar"] for r in m["runs"]]
        ar = [r["allreduce"] for r in m["runs"]]
        ratios = sorted(a / s for a, s in zip(ar, sar, strict=True))
        m["ratio_min_med_max"] = [ratios[0], ratios[len(ratios) // 2], ratios[-1]]
        print(f"{m['n']:>3} {m['reduce_scatter_s'] * 1e3:>8.2f} {_stats(sar):>26} {_stats(ar):>27} "
              f"{ratios[0]:>7.2f} {ratios[len(ratios) // 2]:.2f} {ratios[-1]:.2f} "
              f"{m['float64_bit_identical']!s:>13} {m['float32_max_rel_diff']:.1e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"schedules": sched, "speedups": sp, "break_even_s": be, "selector": sel,
                                    "gloo": measured, "numel": args.numel}, indent=1))
    _plot(sp, measured, args.out.with_suffix(".png"))
    print(f"\nwrote {args.out} and {args.out.with_suffix('.png')}")


def _plot(sp: list[dict], measured: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    ns = [r["n"] for r in sp]
    a.plot(ns, [r["closed_form"] for r in sp], "o-", label="closed form (bound rounds)")
    a.plot(ns, [r["simulated_on_schedule"] for r in sp], "s--", label="our schedule's rounds")
    a.set_xscale("log", base=2)
    a.set(xlabel="ranks n", ylabel="speedup over Ring", title="α-β, α=3 µs, 450 GiB/s, 1 GiB")
    a.legend()
    for i, m in enumerate(measured):
        b.boxplot([[r["stragglar"] * 1e3 for r in m["runs"]], [r["allreduce"] * 1e3 for r in m["runs"]]],
                  positions=[3 * i, 3 * i + 1])
    b.set_xticks([p for i in range(len(measured)) for p in (3 * i, 3 * i + 1)],
                 [f"{lab} n={m['n']}" for m in measured for lab in ("SAR", "AR")])
    b.set(ylabel="ms after the straggler arrives", title="gloo, loopback")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
