"""A profile: a named, ordered list of plug-ins with their options, loaded from YAML or from the settings.

As with the Kubernetes scheduler's profiles, a deployment composes its policy instead of switching flags
on a monolith::

    name: my-profile
    plugins:
      - plugin: srsf
      - plugin: starvation_bound
        options: {slowdown: 4}
      - plugin: deadline_aware

:meth:`Profile.policy` checks every plug-in and option (an unknown plug-in, an unknown option or a bad
value is refused with a :class:`ProfileError` naming the plug-in and the option) and builds the
:class:`~policies.profile_policy.ProfilePolicy` the scheduling core calls. The shipped profiles are
``policies/profiles/*.yaml``; ``default.yaml`` is the ``propius`` policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from policies.errors import PolicyOptionError
from policies.plugins import available_plugins
from policies.plugins.base import Plugin
from policies.profile_policy import ProfilePolicy

__all__ = ["SHIPPED", "PluginSpec", "Profile", "ProfileError", "load_profile", "shipped_profile"]

SHIPPED = Path(__file__).parent / "profiles"
SINGLE = ("sort", "partition")  # the points a profile may fill with one plug-in at most


class ProfileError(PolicyOptionError):
    """A profile the policy cannot be built from; the message names the profile, the plug-in and the option."""


class PluginSpec(BaseModel):
    """One entry of a profile: a plug-in's name and its options (checked against the plug-in when built)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plugin: str
    options: dict[str, JsonValue] = Field(default_factory=dict)


class Profile(BaseModel):
    """A named, ordered list of plug-ins; the order matters within a point (``offer`` plug-ins run in it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    plugins: tuple[PluginSpec, ...] = ()

    def built(self) -> list[Plugin]:
        """The plug-ins, constructed; ProfileError names the first unknown plug-in or bad option."""
        known = available_plugins()
        plugins: list[Plugin] = []
        for spec in self.plugins:
            if spec.plugin not in known:
                raise ProfileError(f"profile {self.name!r}: unknown plug-in {spec.plugin!r}; "
                                   f"known: {', '.join(sorted(known))}")
            try:
                plugins.append(known[spec.plugin].model_validate(spec.options))
            except ValidationError as error:
                reasons = "; ".join(f"option {'.'.join(map(str, e['loc'])) or '?'}"
                                    f"{'=' + repr(e['input']) if e['type'] != 'extra_forbidden' else ''}: {e['msg']}"
                                    for e in error.errors())
                raise ProfileError(f"profile {self.name!r}: plug-in {spec.plugin!r}: {reasons}") from None
        for point in SINGLE:
            named = [plugin.name for plugin in plugins if plugin.point == point]
            if len(named) > 1:
                raise ProfileError(f"profile {self.name!r}: plug-ins {', '.join(named)} all fill the {point!r} "
                                   "point, which takes one")
        return plugins

    def policy(self) -> ProfilePolicy:
        """The policy this profile composes (see :class:`~policies.profile_policy.ProfilePolicy`)."""
        return ProfilePolicy(self.name, self.built())

    def overridden(self, overrides: Mapping[str, Any]) -> Profile:
        """This profile with ``overrides`` applied, as ``--option`` / ``policy_options`` give them.

        ``PLUGIN=false`` drops a plug-in; ``PLUGIN=true`` adds it with its defaults (where absent);
        ``PLUGIN={...}`` or ``PLUGIN.OPTION=value`` sets options, adding the plug-in where absent. A plug-in added
        to a point that takes one (``sort``, ``partition``) replaces the one there; others are appended.
        """
        specs = list(self.plugins)
        known = available_plugins()
        for key, value in overrides.items():
            plugin, dot, option = key.partition(".")
            if plugin not in known:
                raise ProfileError(f"profile {self.name!r}: unknown plug-in {plugin!r} in option {key!r}; "
                                   f"known: {', '.join(sorted(known))}")
            if dot:
                value = {option: value}
            index = next((i for i, spec in enumerate(specs) if spec.plugin == plugin), None)
            if value is False or value in ("false", "False", "off"):
                specs = [spec for spec in specs if spec.plugin != plugin]
                continue
            if value is True or value in ("true", "True", "on"):
                value = {}
            if not isinstance(value, Mapping):
                raise ProfileError(f"profile {self.name!r}: option {key}={value!r}: expected true, false or a "
                                   "mapping of the plug-in's options")
            if index is not None:
                specs[index] = PluginSpec(plugin=plugin, options={**specs[index].options, **value})
                continue
            if known[plugin].point in SINGLE:
                specs = [spec for spec in specs if known[spec.plugin].point != known[plugin].point]
            specs.append(PluginSpec(plugin=plugin, options=dict(value)))
        return self.model_copy(update={"plugins": tuple(specs)})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(), sort_keys=False)


def load_profile(source: Path | str | Mapping[str, Any]) -> Profile:
    """A profile from a YAML file's path, a shipped profile's name (``default``, ``makespan``: where no such file
    exists), or an already parsed mapping (inline settings); checked by building it.

    Raises ProfileError for a file that cannot be read or is not a valid profile.
    """
    where = source if isinstance(source, (str, Path)) else "inline profile"
    if isinstance(source, (str, Path)) and str(source).isidentifier() and not Path(source).exists():
        source = SHIPPED / f"{source}.yaml"  # a shipped profile's name
    try:
        data = yaml.safe_load(Path(source).read_text()) if isinstance(source, (str, Path)) else source
        profile = Profile.model_validate(data)
    except (OSError, yaml.YAMLError) as error:
        raise ProfileError(f"cannot read profile {where}: {error}") from None
    except ValidationError as error:
        raise ProfileError(f"{where}: not a profile: {error}") from None
    profile.built()
    return profile


def shipped_profile(name: str) -> Profile:
    """One of ``policies/profiles/*.yaml`` by name (``default``, ``makespan``)."""
    return load_profile(SHIPPED / f"{name}.yaml")
