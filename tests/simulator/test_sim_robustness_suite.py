"""The robustness benchmark's suites (``--suite``): ``benchmarks/families.yaml`` matches the docs' family table and
``benchmarks/tail_runs.yaml`` their tail table, a bad entry is refused by name, and the per-family summary counts
what the tables count."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.policy_robustness import NOISE, SuiteFamily, load_suite, suite_table

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_suite_is_the_docs_family_table() -> None:
    suite = load_suite(ROOT / "benchmarks" / "families.yaml")
    docs = (ROOT / "docs" / "policies.md").read_text()
    section = docs.split("**Every family.**", 1)[1].split("No run leaves a job unfinished", 1)[0]
    rows = {row.split("|")[1].strip(): row for row in section.splitlines() if re.match(r"\| \d+-\d+ \|", row)}
    assert len(rows) == len(suite)
    for family in suite:
        seeds = family.label().split("|")[0].strip()
        assert seeds in rows, seeds
        cell = rows[seeds].split("|")[2]
        if family.family:
            assert json.loads(cell.split("`")[1]) == family.family, seeds
        else:
            assert "the benchmark's" in cell, seeds
        runs = family.workloads * len(family.seeds)
        assert f"of {runs} " in rows[seeds], seeds


def test_the_tail_runs_suite_is_the_docs_tail_table_each_in_its_family() -> None:
    families = load_suite(ROOT / "benchmarks" / "families.yaml")
    tails = load_suite(ROOT / "benchmarks" / "tail_runs.yaml")
    docs = (ROOT / "docs" / "policies.md").read_text()
    table = docs.split("| run | job | vs its FIFO JCT |", 1)[1].split("\n\n", 1)[0]
    assert [f"{run.family_seed}/{run.seeds[0]}" for run in tails] == re.findall(r"^  \| (\d+/\d) \|", table, re.M)
    for run in tails:
        home = next(f for f in families if f.family_seed <= run.family_seed < f.family_seed + f.workloads)
        assert run.family == home.family and run.workloads == 1 and run.seeds[0] in home.seeds, run


@pytest.mark.parametrize(("entry", "named"), [
    ("- {family: {jobs: [5]}, family_seed: 0}", "jobs"),
    ("- {family_seed: 0}\n- {family: {no_such: 1}, family_seed: 40}", "no_such"),
    ("- {family_seed: 0, seeds: []}", "seeds"),
    ("- {workloads: 3}", "family_seed"),
])
def test_a_bad_suite_entry_is_refused_naming_it(entry: str, named: str, tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(entry)
    with pytest.raises(ValueError, match=rf"family {entry.count('- ')}:(.|\n)*{named}"):
        load_suite(path)


def test_an_empty_suite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text("[]")
    with pytest.raises(ValueError, match="non-empty list"):
        load_suite(path)


def _entry(avg: float, worst: float) -> dict:
    return {"avg_ratio": avg, "worst_ratio": worst}


def test_the_summary_counts_each_family_and_the_totals() -> None:
    # Two families. The first: one run losing by 5 %, one with a job at 1.6x; its noise row one of each as well.
    # The second: nothing above the bars, and no noise row ran.
    suite = [SuiteFamily(family_seed=0, workloads=2, seeds=(0,)),
             SuiteFamily(family={"over_selection": 1.0}, family_seed=100, workloads=1, seeds=(0, 1))]
    comparisons = [
        {"fifo": [_entry(1, 1)] * 2, "propius": [_entry(1.05, 1.2), _entry(0.7, 1.6)],
         NOISE: [_entry(1.03, 1.7), _entry(1.0, 1.0)]},
        {"fifo": [_entry(1, 1)] * 2, "propius": [_entry(0.6, 1.1), _entry(0.8, 1.4)]},
    ]
    lines = suite_table(suite, comparisons, tolerance=0.02)
    body = [line for line in lines if line.startswith("| ") and not line.startswith("| family seeds")]
    assert body == [
        "| 0-1 | the benchmark's | 0.875 | 1.050 | 1 [1] of 2 | 1 [1] of 2 (1.60x) |",
        '| 100-100 | `{"over_selection": 1.0}` | 0.700 | 0.800 | 0 [-] of 2 | 0 [-] of 2 (1.40x) |',
        "| all | 2 families | | 1.050 | 1 [1] of 4 | 1 [1] of 4 (1.60x) |",
    ]
