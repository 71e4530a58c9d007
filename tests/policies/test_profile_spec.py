"""Profiles: loaded from YAML or settings, round-tripped, overridden, and refused by name when wrong."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from policies import (
    JobView,
    PolicyOptionError,
    Profile,
    ProfileError,
    ProfilePolicy,
    PropiusPolicy,
    SchedulingContext,
    configured_policy,
    load_policy,
    load_profile,
    shipped_profile,
)
from policies.plugins import PLUGIN_GROUP, available_plugins
from policies.plugins.starvation_bound import StarvationBound
from policies.profile import PluginSpec
from propius.config import Settings

GOOD = """\
name: mine
plugins:
  - plugin: srsf
  - plugin: starvation_bound
    options: {slowdown: 4}
  - plugin: straggler_guard
    options: {slack: 0.5}
"""


def test_a_profile_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(GOOD)
    profile = load_profile(path)
    again = tmp_path / "again.yaml"
    again.write_text(profile.to_yaml())
    assert load_profile(again) == profile
    for name in ("default", "makespan"):
        assert Profile.model_validate_json(shipped_profile(name).model_dump_json()) == shipped_profile(name)
    policy = profile.policy()
    assert isinstance(policy, ProfilePolicy) and policy.profile == "mine"
    assert [p.name for p in policy.plugins] == ["srsf", "starvation_bound", "straggler_guard"]
    assert policy.plugin("starvation_bound") == StarvationBound(slowdown=4)


@pytest.mark.parametrize(("text", "named"), [
    ("name: x\nplugins: [{plugin: srfs}]", r"profile 'x': unknown plug-in 'srfs'; known: .*srsf"),
    ("name: x\nplugins: [{plugin: doom_guard, options: {min: 5}}]", r"plug-in 'doom_guard': option min: Extra"),
    ("name: x\nplugins: [{plugin: doom_guard, options: {min_s: -5}}]",
     r"plug-in 'doom_guard': option min_s=-5: Input should be greater than or equal to 0"),
    ("name: x\nplugins: [{plugin: starvation_bound, options: {slowdown: fast}}]",
     r"plug-in 'starvation_bound': option slowdown='fast': Input should be a valid number"),
    ("name: x\nplugins: [{plugin: srsf}, {plugin: longest_first}]", r"srsf, longest_first all fill the 'sort'"),
    ("name: x\nplugin: [{plugin: srsf}]", r"not a profile"),
])
def test_a_bad_profile_is_refused_naming_the_plugin_and_option(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=named):
        load_profile(path)
    with pytest.raises(PolicyOptionError, match=named):  # what the CLI and the control plane catch
        load_policy(f"profile:{path}")


def test_a_missing_file_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read profile"):
        load_policy(f"profile:{tmp_path / 'none.yaml'}")


def test_overrides_drop_add_and_set_plugins() -> None:
    base = shipped_profile("default")
    names = lambda profile: [spec.plugin for spec in profile.plugins]  # noqa: E731
    assert "speed_tiers" not in names(base.overridden({"speed_tiers": False}))
    assert names(base.overridden({"longest_first": True}))[-1] == "longest_first"
    assert "srsf" not in names(base.overridden({"longest_first": True}))  # one sort plug-in
    slack = base.overridden({"straggler_guard.slack": 0.5}).policy().plugin("straggler_guard")
    assert slack is not None and slack.slack == 0.5  # type: ignore[attr-defined]
    assert base.overridden({"straggler_guard": {"slack": 0.5}}) == base.overridden({"straggler_guard.slack": 0.5})
    with pytest.raises(ProfileError, match="unknown plug-in 'scarce_first'"):
        base.overridden({"scarce_first": True})
    with pytest.raises(ProfileError, match=r"option speed_tiers='maybe'"):
        base.overridden({"speed_tiers": "maybe"})
    with pytest.raises(ProfileError, match=r"plug-in 'straggler_guard': option slack=-2"):
        PropiusPolicy(**{"straggler_guard.slack": -2})


def test_the_default_policy_is_the_default_profile() -> None:
    assert PropiusPolicy().plugins == shipped_profile("default").policy().plugins
    assert isinstance(load_policy("propius"), PropiusPolicy)
    assert PropiusPolicy().plugin("starvation_bound") is not None  # the bound is on by default
    makespan = load_policy("profile:makespan")  # a shipped profile by name
    assert isinstance(makespan, ProfilePolicy) and makespan.profile == "makespan" and makespan.wants_fastest_fill


def test_settings_name_a_profile_by_path_or_inline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(GOOD)
    monkeypatch.setenv("PROPIUS_POLICY_PROFILE", str(path))
    settings = Settings()
    policy = configured_policy(settings.policy, settings.policy_options, settings.policy_profile)
    assert isinstance(policy, ProfilePolicy) and policy.profile == "mine"
    monkeypatch.setenv("PROPIUS_POLICY_PROFILE", '{"name": "inline", "plugins": [{"plugin": "srsf"}]}')
    monkeypatch.setenv("PROPIUS_POLICY_OPTIONS", '{"fastest_wake": true}')
    settings = Settings()
    inline = configured_policy(settings.policy, settings.policy_options, settings.policy_profile)
    assert isinstance(inline, ProfilePolicy) and [p.name for p in inline.plugins] == ["srsf", "fastest_wake"]


def test_a_third_party_plugin_is_found_by_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, view: Callable[..., JobView]
) -> None:
    module = "propius_test_plugin_rule"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent("""
        from typing import ClassVar

        from policies.plugins.base import SortPlugin


        class LongestName(SortPlugin):
            name: ClassVar[str] = "longest_name"
            sign: float = -1.0

            def score(self, job, ctx):
                return self.sign * len(job.name)
        """))
    dist_info = tmp_path / f"{module}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\nlongest_name = {module}:LongestName\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    available_plugins.cache_clear()
    try:
        policy = Profile(name="third", plugins=(PluginSpec(plugin="longest_name", options={"sign": 1}),)).policy()
        jobs = [view("a", name="mid"), view("b", name="longest"), view("c", name="x")]
        assert [j.job_id for j in policy.order(jobs, SchedulingContext(now=0.0, supply_by_class={}))] == ["c", "a", "b"]
        assert "srsf" in available_plugins()  # the built-in ones stay
    finally:
        available_plugins.cache_clear()
        sys.modules.pop(module, None)
