"""Legacy ServerApp: server_fn returning the legacy FedAvg over all ``nodes`` nodes."""

import numpy as np
from flwr.common import ndarrays_to_parameters
from flwr.server import ServerApp, ServerAppComponents, ServerConfig
from flwr.server.strategy import FedAvg


def server_fn(context):
    nodes = int(context.run_config["nodes"])
    strategy = FedAvg(fraction_fit=1.0, fraction_evaluate=1.0, min_fit_clients=nodes, min_evaluate_clients=nodes,
                      min_available_clients=nodes, initial_parameters=ndarrays_to_parameters([np.zeros(3)]))
    rounds = int(context.run_config["num-server-rounds"])
    return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=rounds))


app = ServerApp(server_fn=server_fn)
