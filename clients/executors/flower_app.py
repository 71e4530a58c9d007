"""``flower-clientapp``: a Propius executor that runs a Flower app's ClientApp.

The round's model is a bundle of Flower messages (:mod:`clients.flower.codec`); the executor runs
this node's messages through the app's ClientApp in a long-lived worker process
(:mod:`clients.flower.workers`), with the node's Flower Context for the run
(:mod:`clients.flower.contexts`), and uploads the replies as a bundle too. A node the ServerApp sent
nothing this round answers with an empty bundle, so every bound client reports and the round closes; a run
begins with such a round while the ServerApp is still loading. A daemon starts the app's workers as soon as one
of its devices admits a run's offer, so its first message finds them loaded.
"""

from __future__ import annotations

import json
import logging

from clients.executors.base import Executor, Task, TaskResult
from clients.flower.allowed import ENV, is_allowed
from clients.flower.codec import bundle_tensors, decode_bundle
from clients.flower.contexts import context_store
from clients.flower.framing import Exchange
from clients.flower.ids import node_id_for
from clients.flower.workers import AppRef, worker_pool
from propius.specs import TaskConfig

__all__ = ["FlowerClientAppExecutor"]

log = logging.getLogger(__name__)


class FlowerClientAppExecutor(Executor):
    """Task options (set by ``propius flower run``): ``app``, ``clientapp``, ``run-id``, ``run-config``."""

    name = "flower-clientapp"

    def __init__(self) -> None:
        self._declined: set[str] = set()

    def admits(self, config: TaskConfig) -> bool:
        """Only apps under the directories the device owner listed in ``PROPIUS_FLOWER_APPS``.

        Admitting an app starts loading its workers (a Python start, imports of flwr and the app's
        framework: seconds), so that a daemon that sees a run's offer has them ready when its first
        message comes, whether or not one of its devices served the run's warm-up round."""
        app_dir = str(config.options.get("app", ""))
        if app_dir and is_allowed(app_dir):
            if "clientapp" in config.options:
                worker_pool().prepare(AppRef(app_dir, str(config.options["clientapp"])))
            return True
        if app_dir not in self._declined:  # once per app, not at every check-in
            self._declined.add(app_dir)
            log.warning("declining Flower app %r: not under %s", app_dir, ENV)
        return False

    def run(self, task: Task) -> TaskResult:
        options = task.config.options
        if not self.admits(task.config):
            raise PermissionError(f"Flower app {options.get('app')!r} is not allowed on this device ({ENV})")
        app = AppRef(str(options["app"]), str(options["clientapp"]))
        worker_pool().prepare(app)  # a run's first round (its warm-up) starts the app's workers here
        bundle = decode_bundle(task.model)
        node_id = node_id_for(task.client_id)
        current = (bundle.meta.get("round"), bundle.meta.get("attempt")) == (task.round, task.attempt)
        header = {"run_id": int(options["run-id"]), "node_id": node_id,
                  "run_config": json.loads(str(options.get("run-config", "{}"))),
                  "node_config": bundle.meta.get("node_config", {}).get(str(node_id), {})}
        store = context_store()
        objects: dict[str, bytes] = {}
        reply_ids = []
        for message_id in bundle.messages.get(node_id, []) if current else []:
            context = store.load(header["run_id"], node_id) or b""
            reply = worker_pool().worker(app).handle(Exchange(message_id, bundle.contents, context, header))
            if reply.context:
                store.save(header["run_id"], node_id, reply.context)
            objects.update(reply.objects)
            reply_ids.append(reply.message_id)
        return TaskResult(update=bundle_tensors({node_id: reply_ids}, objects), num_samples=1.0,
                          metrics={"flower_replies": float(len(reply_ids))})
