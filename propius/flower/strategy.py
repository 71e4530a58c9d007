"""``PropiusSelected``: any Flower strategy, sampling only from the nodes Propius selects.

For users who stay on Flower's own runtime (SuperLink, simulation). Open-source Flower lets every
run see every node; wrapping the strategy makes each of its rounds a Propius round over those nodes
(:mod:`propius.flower.selection`), so Propius's eligibility, policies and multi-job sharing decide
which nodes the strategy may sample::

    strategy = PropiusSelected(FedAvg(fraction_train=1.0), server="127.0.0.1:50051", demand=5,
                               requirements={"public": {"ram": {"min": 6}}}, profile=my_profiles)
    strategy.start(grid=grid, initial_arrays=arrays, num_rounds=3)

The inner strategy is unchanged: it is handed a Grid whose ``get_node_ids`` answers with the selected
nodes only, and it sends to and aggregates them as usual.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.proto.node_pb2 import NodeInfo
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore.run import Run

from propius.config import ChannelSecurity
from propius.flower.selection import Selection, Selector
from propius.specs import ClientProfile, JobSpec

__all__ = ["PropiusSelected"]


STABLE_S = 0.9  # under the 1 s that Flower's sample_nodes sleeps between its calls
STARTUP_WAIT_S = 10.0  # how long a federation without any node yet is waited for
PROXY_LABEL = "flower_node"  # set on proxy clients and required by the job: real devices are never offered it


def _any_node(_: int) -> ClientProfile:
    return ClientProfile()


class _SelectedGrid(Grid):
    """A view of a Grid whose nodes are those selected for the current round."""

    def __init__(self, grid: Grid, select: Callable[[list[int]], list[int]]) -> None:
        self._grid = grid
        self._select = select
        self._answer: tuple[float, list[int]] | None = None

    def set_run(self, run: Run) -> None:
        self._grid.set_run(run)

    @property
    def run(self) -> Run:
        return self._grid.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return self._grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        """The selected nodes. Strategies ask twice in a row (to size the sample, then to draw it), and
        again each second while they wait for enough nodes: an answer stands for a second, after which
        a call may select more while the round has room. A runtime still starting (no node yet) is given
        a few seconds, so that a strategy does not size its first sample on an empty federation."""
        if self._answer is not None and time.monotonic() - self._answer[0] < STABLE_S:
            return list(self._answer[1])
        deadline = time.monotonic() + STARTUP_WAIT_S
        while not (nodes := list(self._grid.get_node_ids())) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not nodes:
            return []
        selected = self._select(nodes)
        if selected:
            self._answer = (time.monotonic(), selected)
        return list(selected)

    def get_nodes(self) -> Iterable[NodeInfo]:
        return (NodeInfo(node_id=node_id) for node_id in self.get_node_ids())

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self._grid.send_and_receive(messages, timeout=timeout)


class PropiusSelected(Strategy):
    """Wraps ``inner``; ``profile(node_id)`` gives a node's public attributes (default: none); ``security``: the
    channel's TLS settings (None: from the environment)."""

    def __init__(self, inner: Strategy, server: str, *, demand: int, name: str = "flower-selection",
                 requirements: Mapping[str, Any] | None = None, over_selection: float = 1.0,
                 profile: Callable[[int], ClientProfile] = _any_node,
                 security: ChannelSecurity | None = None) -> None:
        self.inner = inner
        wanted = dict(requirements or {})
        wanted["public"] = {**wanted.get("public", {}), PROXY_LABEL: {"in": ["yes"]}}
        spec = JobSpec.parse({"name": name, "demand": demand, "over_selection": over_selection,
                              "requirements": wanted, "task": {"executor": "flower-proxy"}})

        def proxy_profile(node_id: int) -> ClientProfile:
            base = profile(node_id)
            return base.model_copy(update={"labels": {**base.labels, PROXY_LABEL: "yes"}})

        self._selector = Selector(spec, server, proxy_profile, security)
        self._opened = False

    @property
    def history(self) -> list[Selection]:
        """Per Propius round: the nodes selected and the nodes that replied."""
        return self._selector.history

    def _narrow(self, grid: Grid) -> Grid:
        def select(nodes: list[int]) -> list[int]:
            self._opened = True
            return self._selector.select(nodes)

        return _SelectedGrid(grid, select)

    def _close_round(self, replies: Iterable[Message]) -> list[Message]:
        replies = list(replies)
        if self._opened:
            self._selector.report(replies)
            self._opened = False
        return replies

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
                        ) -> Iterable[Message]:
        return self.inner.configure_train(server_round, arrays, config, self._narrow(grid))

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        return self.inner.aggregate_train(server_round, self._close_round(replies))

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
                           ) -> Iterable[Message]:
        return self.inner.configure_evaluate(server_round, arrays, config, self._narrow(grid))

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(server_round, self._close_round(replies))

    def summary(self) -> None:
        self.inner.summary()

    def start(self, grid: Grid, initial_arrays: ArrayRecord, *args: Any, **kwargs: Any) -> Result:
        """Flower's own round loop (``Strategy.start``); the Propius job completes with it."""
        try:
            result = super().start(grid, initial_arrays, *args, **kwargs)
        except BaseException:
            self._selector.close(failed=True)
            raise
        self._selector.close()
        return result
