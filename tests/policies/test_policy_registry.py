"""Policies are found through entry points, including one a third party ships as a single file."""

from __future__ import annotations

import pickle
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from policies import (
    FifoPolicy,
    JobView,
    PolicyOptionError,
    PropiusPolicy,
    RandomOrderPolicy,
    SchedulingContext,
    SrsfPolicy,
    UnknownPolicyError,
    available_policies,
    load_policy,
    parse_options,
)
from policies.registry import validated_options
from propius.config import Settings

PLUGIN = "propius_test_plugin_policy"


def test_the_builtin_policies_come_from_entry_points() -> None:
    found = available_policies()

    assert {"fifo": FifoPolicy, "random": RandomOrderPolicy, "srsf": SrsfPolicy}.items() <= found.items()
    assert isinstance(load_policy("srsf"), SrsfPolicy)
    assert all(cls.name == name for name, cls in found.items() if name in {"fifo", "random", "srsf"})


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPolicyError) as caught:
        load_policy("lottery")

    assert isinstance(caught.value, KeyError)
    assert {"fifo", "random", "srsf"} <= set(caught.value.known)
    assert "unknown policy 'lottery'" in str(caught.value)
    assert all(name in str(caught.value) for name in ("fifo", "random", "srsf"))
    # Raised in a benchmark's worker process, it reaches the caller whole (not as a broken pool).
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), copy.name, copy.known, str(copy)) == (UnknownPolicyError, "lottery", caught.value.known,
                                                            str(caught.value))


def test_options_reach_the_policy_and_a_misspelt_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_options(["longest_first=true", "straggler_guard.slack=0.5", "note=x=y"]) == {
        "longest_first": True, "straggler_guard.slack": 0.5, "note": "x=y"}
    with pytest.raises(ValueError, match="key=value"):
        parse_options(["longest_first"])
    monkeypatch.setenv("PROPIUS_POLICY_OPTIONS", '{"longest_first": true, "straggler_guard": {"slack": 0.5}}')
    settings = Settings()
    policy = load_policy(settings.policy, **settings.policy_options)  # as the control plane builds it
    assert isinstance(policy, PropiusPolicy) and policy.plugin("longest_first") is not None
    assert policy.plugin("straggler_guard").slack == 0.5  # type: ignore[union-attr]
    with pytest.raises(PolicyOptionError, match="'default'.*unknown plug-in 'longest_frist'"):
        load_policy("propius", longest_frist=True)


def test_option_values_are_checked_against_the_constructor_and_coerced(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python-style and CLI-style spellings mean what they say; "False" is not a truthy string.
    policy = load_policy("propius", **parse_options(["speed_tiers=False", "fastest_wake=off",
                                                     "hold_for_tight.tight_fraction=0.6"]))
    assert isinstance(policy, PropiusPolicy)
    assert policy.plugin("speed_tiers") is None and policy.plugin("fastest_wake") is None
    assert policy.plugin("hold_for_tight").tight_fraction == 0.6  # type: ignore[union-attr]
    with pytest.raises(PolicyOptionError, match=r"'default'.*wait_for_faster='maybe'"):
        load_policy("propius", wait_for_faster="maybe")
    with pytest.raises(PolicyOptionError, match=r"tight_fraction=1.5.*less than or equal to 1"):
        load_policy("propius", **{"hold_for_tight.tight_fraction": 1.5})
    with pytest.raises(PolicyOptionError, match=r"hold_slack=-0.5.*greater than or equal to 0"):
        load_policy("propius", hold_for_tight={"hold_slack": -0.5})
    straggler = load_policy("propius", **{"straggler_guard.slack": -0.1}).plugin("straggler_guard")  # type: ignore[attr-defined]
    assert straggler.slack == -0.1  # a tighter close is allowed
    with pytest.raises(PolicyOptionError, match=r"caps=\{'alice': 2\}"):
        load_policy("fair-share", caps={"alice": 2})
    # Nested options travel through the settings too (fair share's per-tenant weights).
    monkeypatch.setenv("PROPIUS_POLICY", "fair-share")
    monkeypatch.setenv("PROPIUS_POLICY_OPTIONS", '{"weights": {"alice": "2"}, "borrowing": "false"}')
    settings = Settings()
    fair = load_policy(settings.policy, **settings.policy_options)
    assert fair.weights == {"alice": 2.0} and fair.borrowing is False  # type: ignore[attr-defined]


class _ForwardHinted(FifoPolicy):
    """A plug-in annotating with a name only its type checker imports: its options pass unchecked."""

    def __init__(self, clock: Clock | None = None) -> None:  # noqa: F821
        self.clock = clock


def test_options_of_a_plugin_with_unresolvable_annotations_pass_as_given() -> None:
    assert validated_options("forward", _ForwardHinted, {"clock": 3}) == {"clock": 3}
    with pytest.raises(PolicyOptionError, match="unexpected keyword argument 'tick'"):
        validated_options("forward", _ForwardHinted, {"tick": 3})


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Put a one-module distribution with the given entry points on sys.path, as pip would install it."""
    (tmp_path / f"{PLUGIN}.py").write_text(
        textwrap.dedent(
            """
            from policies import Policy


            class LongestNameFirst(Policy):
                name = "longest-name"

                def __init__(self, sign: float = -1.0) -> None:
                    self.sign = sign

                def score(self, job, ctx):
                    return self.sign * len(job.name)


            NOT_A_POLICY = object()
            """
        )
    )

    def install(entry_points: str) -> None:
        dist_info = tmp_path / f"{PLUGIN}-1.0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 1.0\n")
        (dist_info / "entry_points.txt").write_text(f"[propius.policies]\n{entry_points}\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        available_policies.cache_clear()

    yield install
    available_policies.cache_clear()
    sys.modules.pop(PLUGIN, None)


def test_a_third_party_policy_is_found_by_its_entry_point(
    install_plugin: Callable[[str], None], view: Callable[..., JobView]
) -> None:
    install_plugin(f"longest-name = {PLUGIN}:LongestNameFirst")
    policy = load_policy("longest-name")
    jobs = [view("a", name="mid"), view("b", name="longest"), view("c", name="x")]
    ctx = SchedulingContext(now=0.0, supply_by_class={})

    # score = -len(name): longest (-7) < mid (-3) < x (-1)
    assert [j.job_id for j in policy.order(jobs, ctx)] == ["b", "a", "c"]
    # options reach the constructor: a positive sign turns it into shortest name first
    assert [j.job_id for j in load_policy("longest-name", sign=1.0).order(jobs, ctx)] == ["c", "a", "b"]
    assert "fifo" in available_policies()


def test_an_entry_point_that_is_not_a_policy_is_refused(install_plugin: Callable[[str], None]) -> None:
    install_plugin(f"broken = {PLUGIN}:NOT_A_POLICY")
    with pytest.raises(TypeError, match="broken"):
        available_policies()
