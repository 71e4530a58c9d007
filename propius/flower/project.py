"""A Flower app directory as Propius sees it: ``[tool.flwr.app]`` plus an optional ``[tool.propius]``.

``[tool.flwr.app]`` names the ServerApp, the ClientApp and the default run config, exactly as for
``flwr run``. ``[tool.propius]`` (all optional) says what the run asks of Propius; flags override it::

    [tool.propius]
    demand = 10                 # nodes per round (per Grid send); default 10
    over-selection = 1.0        # bind up to ceil(demand x this) clients; stragglers are cut
    partitions = 10             # num-partitions in node_config; default: demand
    priority = 0.0
    schedule-timeout-s = 60
    execution-timeout-s = 600
    [tool.propius.requirements.public]
    cpu_f = {min = 7}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flwr.app import UserConfig
from flwr.common.config import flatten_dict, fuse_dicts, get_metadata_from_config, get_project_config

from propius.specs import JobSpec

__all__ = ["FlowerProject", "RunOptions"]

EXECUTOR = "flower-clientapp"
_DEFAULTS: dict[str, Any] = {"demand": 10, "over_selection": 1.0, "partitions": None, "priority": 0.0,
                             "schedule_timeout_s": 60.0, "execution_timeout_s": 600.0, "requirements": {},
                             "name": None}


@dataclass(frozen=True)
class RunOptions:
    """What a run asks of Propius; ``None`` fields fall back to ``[tool.propius]``, then to defaults."""

    demand: int | None = None
    over_selection: float | None = None
    partitions: int | None = None
    priority: float | None = None
    requirements: Mapping[str, Any] | None = None
    name: str | None = None

    def resolve(self, table: Mapping[str, Any]) -> dict[str, Any]:
        """Flags over ``[tool.propius]`` over defaults, as JobSpec-style snake_case keys."""
        from_table = {key.replace("-", "_"): value for key, value in table.items()}
        unknown = set(from_table) - set(_DEFAULTS)
        if unknown:
            raise ValueError(f"[tool.propius]: unknown keys {sorted(unknown)}")
        flags = {key: value for key, value in vars(self).items() if value is not None}
        return {**_DEFAULTS, **from_table, **flags}


@dataclass(frozen=True)
class FlowerProject:
    root: Path
    fab_id: str
    fab_version: str
    serverapp: str
    clientapp: str
    default_config: UserConfig
    propius: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, app_dir: str | Path) -> FlowerProject:
        root = Path(app_dir).resolve()
        config = get_project_config(root)
        fab_id, fab_version = get_metadata_from_config(config)
        app = config["tool"]["flwr"]["app"]
        return cls(
            root=root, fab_id=fab_id, fab_version=fab_version,
            serverapp=app["components"]["serverapp"], clientapp=app["components"]["clientapp"],
            default_config=flatten_dict(app.get("config", {})), propius=dict(config["tool"].get("propius", {})),
        )

    def run_config(self, overrides: UserConfig) -> UserConfig:
        """The app's config with ``--run-config`` overrides (unknown keys are refused, as by ``flwr run``)."""
        return fuse_dicts(self.default_config, dict(overrides))

    def job_spec(self, run_id: int, run_config: UserConfig, options: RunOptions) -> tuple[JobSpec, int]:
        """The Propius job hosting one run, and the run's number of partitions."""
        resolved = options.resolve(self.propius)
        publisher, project = self.fab_id.split("/")
        name = resolved["name"] or re.sub(r"[^A-Za-z0-9._-]", "-", f"flower-{project}")
        spec = JobSpec.parse({
            "name": name, "owner": publisher, "demand": resolved["demand"],
            "over_selection": resolved["over_selection"], "priority": resolved["priority"],
            "schedule_timeout_s": resolved["schedule_timeout_s"],
            "execution_timeout_s": resolved["execution_timeout_s"],
            "requirements": resolved["requirements"], "aggregation": "collect",
            "task": {"executor": EXECUTOR, "options": {
                "app": str(self.root), "clientapp": self.clientapp,
                "run-id": str(run_id), "run-config": json.dumps(dict(run_config)),
            }},
        })
        return spec, int(resolved["partitions"] or spec.demand)
