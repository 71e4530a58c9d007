"""Flower on Propius: run unmodified Flower apps with Propius choosing, sharing and watching clients.

- :mod:`propius.flower.host` hosts a ServerApp on :class:`~propius.flower.grid.PropiusGrid`
  (``propius flower run APP_DIR``); :mod:`propius.flower.launch` does it in a process of its own.
- ``clients.executors.flower_app`` runs the ClientApp on client daemons (executor ``flower-clientapp``).
- :class:`~propius.flower.strategy.PropiusSelected` brings Propius's client selection to Flower's own
  runtimes (SuperLink, simulation).

See docs/flower.md.
"""
