"""Which data partition each node of a run reads (Flower's ``partition-id`` / ``num-partitions``).

Flower's simulation gives node *i* of *N* partition *i*, and its examples split a dataset with those
two keys. On Propius the nodes of a round are whichever clients the policy bound, so a run keeps one
map: a node keeps its partition while no other node of the same round holds it, and a round never
gives two nodes the same partition while it has no more nodes than partitions. A full round therefore
covers every partition exactly once, as in Flower's simulation.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PartitionMap"]


class PartitionMap:
    def __init__(self, partitions: int) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be at least 1, got {partitions}")
        self.partitions = partitions
        self._of: dict[int, int] = {}

    def assign(self, nodes: Sequence[int]) -> dict[int, int]:
        """Partition of each node of one round (in ``nodes`` order for newcomers)."""
        chosen: dict[int, int] = {}
        for node in nodes:
            previous = self._of.get(node)
            if previous is not None and previous not in chosen.values():
                chosen[node] = previous
        free = iter(sorted(set(range(self.partitions)) - set(chosen.values())))
        for index, node in enumerate(nodes):
            if node not in chosen:
                chosen[node] = next(free, index % self.partitions)
        self._of.update(chosen)
        return chosen
