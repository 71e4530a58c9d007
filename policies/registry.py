"""Policy discovery through the ``propius.policies`` entry-point group.

A third party adds a policy without editing Propius: one module with a :class:`~policies.base.Policy`
subclass, declared in its own package's ``pyproject.toml``::

    [project.entry-points."propius.policies"]
    my-policy = "my_package.my_policy:MyPolicy"

Once that package is installed, ``PROPIUS_POLICY=my-policy`` selects it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from policies.base import Policy

__all__ = ["ENTRY_POINT_GROUP", "UnknownPolicyError", "available_policies", "load_policy"]

ENTRY_POINT_GROUP = "propius.policies"


class UnknownPolicyError(KeyError):
    """No installed policy has this name; ``known`` lists those that are."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(name)
        self.name = name
        self.known = tuple(sorted(known))

    def __str__(self) -> str:
        return f"unknown policy {self.name!r}; installed: {', '.join(self.known) or 'none'}"


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
    """Instantiate the policy registered as ``name``, passing ``options`` to its constructor."""
    policies = available_policies()
    if name not in policies:
        raise UnknownPolicyError(name, policies)
    return policies[name](**options)
