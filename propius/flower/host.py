"""Host a Flower app's ServerApp in this process, on a Propius-backed Grid (``propius flower run``).

What Flower's SuperLink does for ``flwr run``, minus the SuperLink: read the app, fuse its run config
with the overrides, register one Propius job for the run, set the process's Flower task identity and
call the ServerApp with a :class:`~propius.flower.grid.PropiusGrid`. The job completes when the
ServerApp returns and is cancelled if it raises. Flower's task identity is per process, so one process
hosts one run; :mod:`propius.flower.launch` starts runs in processes of their own.
"""

from __future__ import annotations

import random
from pathlib import Path

from flwr.app import Context, RecordDict, UserConfig
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.server.run_serverapp import run as run_server_app_with
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from propius.config import ChannelSecurity
from propius.flower.grid import PropiusGrid
from propius.flower.project import FlowerProject, RunOptions

__all__ = ["run_app"]


def run_app(app_dir: str | Path, server: str, overrides: UserConfig | None = None,
            options: RunOptions | None = None, *, security: ChannelSecurity | None = None) -> Context:
    """Run the app at ``app_dir`` against the Propius control plane at ``server``; its final Context.
    ``security``: the channel's TLS settings (None: from the environment)."""
    project = FlowerProject.load(app_dir)
    overrides = dict(overrides or {})
    run_config = project.run_config(overrides)
    run_id = random.getrandbits(63)
    spec, partitions = project.job_spec(run_id, run_config, options or RunOptions())
    run = Run.create_empty(run_id)
    run.fab_id, run.fab_version, run.override_config = project.fab_id, project.fab_version, overrides
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, SUPERLINK_NODE_ID
    context = Context(run_id=run_id, node_id=SUPERLINK_NODE_ID, node_config={}, state=RecordDict(),
                      run_config=run_config)
    with PropiusGrid(spec, server, partitions, security) as grid:
        grid.warm_up()  # clients start the ClientApp's workers while this process imports the ServerApp
        grid.set_run(run)
        return run_server_app_with(grid=grid, context=context, server_app_dir=str(project.root),
                                   server_app_attr=project.serverapp)
