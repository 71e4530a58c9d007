"""Policy discovery through the ``propius.policies`` entry-point group.

A third party adds a policy without editing Propius: one module with a :class:`~policies.base.Policy`
subclass, declared in its own package's ``pyproject.toml``::

    [project.entry-points."propius.policies"]
    my-policy = "my_package.my_policy:MyPolicy"

Once that package is installed, ``PROPIUS_POLICY=my-policy`` selects it, and
``PROPIUS_POLICY_OPTIONS='{"key": value}'`` (or ``propius up --policy-option key=value``) sets its
constructor's options. They are validated against the constructor's annotations (pydantic, lax mode,
so ``false`` / ``False`` / ``off`` are False and ``"1.5"`` is 1.5; an ``Annotated[float, Field(ge=0)]``
sets a range): an operator's ``speed_tiers=False`` must not arrive as the truthy string ``"False"``.

A profile (:mod:`policies.profile`) is a policy too: ``profile:PATH`` names the one in a YAML file, and
:func:`configured_policy` builds the one the settings name (``policy_profile``, a path or inline).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from policies.base import Policy
from policies.errors import PolicyOptionError, UnknownPolicyError
from policies.profile import load_profile

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROFILE_PREFIX",
    "PolicyOptionError",
    "UnknownPolicyError",
    "available_policies",
    "configured_policy",
    "load_policy",
    "parse_options",
    "validated_options",
]

ENTRY_POINT_GROUP = "propius.policies"
PROFILE_PREFIX = "profile:"  # a policy named profile:PATH is the profile in that YAML file


@cache
def available_policies() -> dict[str, type[Policy]]:
    """Entry-point name -> policy class, read once per process; treat the result as read-only.

    A plug-in installed while the process runs shows up after ``available_policies.cache_clear()``.
    """
    found: dict[str, type[Policy]] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        target = entry.load()
        if not (isinstance(target, type) and issubclass(target, Policy)):
            raise TypeError(f"entry point {entry.name} = {entry.value} is not a Policy subclass")
        found[entry.name] = target
    return found


def load_policy(name: str, **options: Any) -> Policy:
    """Instantiate the policy registered as ``name``, passing ``options``, validated, to its constructor.

    ``profile:PATH`` is the profile in that YAML file, ``options`` overriding its plug-ins
    (:meth:`policies.profile.Profile.overridden`).
    """
    if name.startswith(PROFILE_PREFIX):
        return load_profile(name.removeprefix(PROFILE_PREFIX)).overridden(options).policy()
    policies = available_policies()
    if name not in policies:
        raise UnknownPolicyError(name, policies)
    return policies[name](**validated_options(name, policies[name], options))


def configured_policy(
    name: str, options: Mapping[str, Any], profile: Path | Mapping[str, Any] | None = None
) -> Policy:
    """The policy settings name: ``profile`` (a YAML path or an inline mapping) when given, else ``name``;
    ``options`` apply to either (the profile's plug-ins are overridden by them)."""
    if profile is None:
        return load_policy(name, **options)
    return load_profile(profile).overridden(options).policy()


def validated_options(name: str, policy: type[Policy], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked and coerced against ``policy``'s constructor; PolicyOptionError names the key."""
    try:
        inspect.signature(policy).bind(**options)
    except TypeError as error:
        raise PolicyOptionError(f"policy {name!r}: {error}") from None
    try:
        hints = typing.get_type_hints(policy.__init__, include_extras=True)
    except (NameError, TypeError):  # a plug-in annotating with names only imported for type checkers
        hints = {}
    validated: dict[str, Any] = {}
    for key, value in options.items():
        try:
            validated[key] = TypeAdapter(hints.get(key, Any)).validate_python(value)
        except ValidationError as error:
            reason = "; ".join(item["msg"] for item in error.errors())
            raise PolicyOptionError(f"policy {name!r}: option {key}={value!r}: {reason}") from None
    return validated


def parse_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``key=value`` policy options; values are parsed as JSON where they can be (true, 1.5, ...).

    Raises ValueError for an item without ``=``.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options
