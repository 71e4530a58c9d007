"""Propius: a resource manager for collaborative (federated) learning across edge devices and the cloud.

The public face: specs (:mod:`propius.specs`), the job SDK (:mod:`propius.sdk`), configuration
(:mod:`propius.config`) and the ``propius`` CLI (:mod:`propius.cli`).
"""

__version__ = "0.1.0"
