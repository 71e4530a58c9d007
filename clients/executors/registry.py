"""Executors are plug-ins: any installed package can add one to the ``propius.executors`` entry-point
group, and a job names it in ``task.executor``."""

from __future__ import annotations

from importlib.metadata import entry_points

from clients.executors.base import Executor

__all__ = ["GROUP", "UnknownExecutor", "available_executors", "load_executor"]

GROUP = "propius.executors"


class UnknownExecutor(LookupError):
    """No installed executor has the requested name."""


def available_executors() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def load_executor(name: str) -> Executor:
    """A new instance of the executor registered as ``name``."""
    matches = entry_points(group=GROUP, name=name)
    if not matches:
        known = ", ".join(available_executors()) or "none"
        raise UnknownExecutor(f"unknown executor {name!r}; installed executors: {known} (entry-point group {GROUP})")
    factory = next(iter(matches)).load()
    if not (isinstance(factory, type) and issubclass(factory, Executor)):
        raise TypeError(f"executor {name!r} is {factory!r}, not an Executor subclass")
    return factory()
