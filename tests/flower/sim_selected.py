"""``python sim_selected.py SERVER``: PropiusSelected(FedAvg) on Flower's simulation runtime (Ray).

Run by ``test_flower_strategy.py`` in a process of its own, so that Ray stays out of the test process
(and a Ray that fails to start cannot hang it). Prints the selections as one JSON line.

Ray is started first, while this process has a single thread; Flower's Ray backend reuses a Ray that
is initialised. Started by Flower, from its simulation thread while Flower's and Propius's gRPC threads
run, Ray's GCS or raylet at times never came up (5 of 9 starts in one CI hour; 4 of 8 took 28-55 s
under load, against 10-12 s): Ray launches them with a ``preexec_fn`` (fork, then Python code before
exec), which is unsafe in a process with threads. Started first: 32 of 32 starts in 9-12 s.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import ray
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

from propius.flower.strategy import PropiusSelected
from propius.specs import ClientProfile

NODES, DEMAND = 8, 3
ELIGIBLE = {"public": {"ram": {"min": 6}}}

client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    content = RecordDict({"arrays": msg.content["arrays"], "metrics": MetricRecord({"num-examples": 10})})
    return Message(content, reply_to=msg)


@client_app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    return Message(RecordDict({"metrics": MetricRecord({"loss": 0.5, "num-examples": 10})}), reply_to=msg)


def main(server: str) -> None:
    ray.init(num_cpus=1, include_dashboard=False)
    ram: dict[int, float] = {}

    def profile(node_id: int) -> ClientProfile:
        """Every other node Flower's simulation created has enough memory for the job."""
        return ClientProfile(numeric={"ram": ram.setdefault(node_id, 8.0 if len(ram) % 2 == 0 else 2.0)})

    strategy = PropiusSelected(FedAvg(min_train_nodes=1, min_evaluate_nodes=1, min_available_nodes=1),
                               server, demand=DEMAND, requirements=ELIGIBLE, profile=profile)
    server_app = ServerApp()

    @server_app.main()
    def run(grid: Grid, context: Context) -> None:
        strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(2)]), num_rounds=2)

    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=NODES,
                   backend_config={"client_resources": {"num_cpus": 1}})
    history = [{"selected": s.selected, "replied": s.replied} for s in strategy.history]
    print(json.dumps({"ram": {str(n): r for n, r in ram.items()}, "history": history}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
