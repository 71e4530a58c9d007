"""The errors a policy's name or options can raise at load; the CLI and the control plane report them and stop."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PolicyOptionError", "UnknownPolicyError"]


class UnknownPolicyError(KeyError):
    """No installed policy has this name; ``known`` lists those that are."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(name)
        self.name = name
        self.known = tuple(sorted(known))

    def __str__(self) -> str:
        return f"unknown policy {self.name!r}; installed: {', '.join(self.known) or 'none'}"

    def __reduce__(self) -> tuple[type, tuple[str, tuple[str, ...]]]:
        # Raised in a benchmark's worker process or on a Ray worker, it is pickled back to the caller.
        return type(self), (self.name, self.known)


class PolicyOptionError(ValueError):
    """The policy does not take these options: an unknown key, or a value of the wrong type or out of its range
    (for a profile, an unknown plug-in or a bad plug-in option, named)."""
