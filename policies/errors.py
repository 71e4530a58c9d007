"""The errors a policy's name or options can raise at load; the CLI and the control plane report them and stop."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

__all__ = ["PolicyOptionError", "UnknownNameError", "UnknownPolicyError"]


class UnknownNameError(KeyError):
    """No installed plug-in of this ``kind`` has this name; ``known`` lists those that are."""

    kind: ClassVar[str]

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(name)
        self.name = name
        self.known = tuple(sorted(known))

    def __str__(self) -> str:
        return f"unknown {self.kind} {self.name!r}; installed: {', '.join(self.known) or 'none'}"

    def __reduce__(self) -> tuple[type, tuple[str, tuple[str, ...]]]:
        # Raised in a benchmark's worker process or on a Ray worker, it is pickled back to the caller.
        return type(self), (self.name, self.known)


class UnknownPolicyError(UnknownNameError):
    """No installed policy has this name."""

    kind = "policy"


class PolicyOptionError(ValueError):
    """The policy does not take these options: an unknown key, or a value of the wrong type or out of its range
    (for a profile, an unknown plug-in or a bad plug-in option, named)."""
