"""NumPyClient: adds 1 to every weight; reports the partition it trained on."""

import numpy as np
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp


class AddOne(NumPyClient):
    def __init__(self, partition: int) -> None:
        self.partition = partition

    def fit(self, parameters, config):
        return [p + 1 for p in parameters], 10, {"partition": self.partition}

    def evaluate(self, parameters, config):
        return float(np.mean(parameters[0])), 10, {"partition": self.partition}


def client_fn(context):
    return AddOne(int(context.node_config["partition-id"])).to_client()


app = ClientApp(client_fn=client_fn)
