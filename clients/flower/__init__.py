"""Client-side Flower runtime: ClientApp worker processes and the Flower Contexts of nodes."""
