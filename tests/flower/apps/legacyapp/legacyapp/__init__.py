"""A legacy Flower app: NumPyClient + ServerApp(server_fn) with the legacy FedAvg."""
