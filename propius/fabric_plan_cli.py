"""``propius fabric plan JOB``: the Opus circuit plan of a job on a fabric's OCS rails.

Reads a fabric file (YAML, :func:`propius.fabric.load_fabric`) and a job description
(:class:`propius.fabric.opus_job.JobDescription`, YAML or JSON), plans the job's phases on its
placement (rail-aligned when the fabric file gives it no accelerators) and prints the configurations,
their circuits per rail and the predicted iteration time against an always-connected fabric.
Register with ``fabric_app.command("plan")(plan_command)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
import yaml
from pydantic import ValidationError

from policies.placement.rail_aligned import RailAlignedPlacement
from propius.fabric import FabricError, FabricState, load_fabric
from propius.fabric.opus_job import JobDescription, plan_for

__all__ = ["plan_command"]

MAX_JOB_FILE_BYTES = 4 * 2**20
"""A job description is small; refuse to parse anything bigger."""

_FILE = {"exists": True, "dir_okay": False, "readable": True}


def plan_command(
    job: Annotated[str, typer.Argument(help="the job, as the fabric file names it (or to place there)")],
    fabric: Annotated[Path, typer.Option("--fabric", **_FILE, help="fabric file (YAML)")],
    job_file: Annotated[Path, typer.Option("--job-file", **_FILE, help="job description: phases or "
                                                                      "request + model (YAML or JSON)")],
    reconfig_ms: Annotated[float | None, typer.Option(min=0.0, help="OCS switching time; overrides the "
                                                                    "job file's reconfig_ms")] = None,
) -> None:
    """Print the job's per-phase circuits, merged configurations and predicted switching overhead."""
    try:
        if job_file.stat().st_size > MAX_JOB_FILE_BYTES:
            raise FabricError(str(job_file), f"is larger than {MAX_JOB_FILE_BYTES} bytes")
        data = yaml.safe_load(job_file.read_text())
        if reconfig_ms is not None and isinstance(data, dict):
            data = {**data, "reconfig_ms": reconfig_ms}
        description = JobDescription.model_validate(data)
        state = FabricState(load_fabric(fabric))
        plan, ideal = plan_for(state, job, description, place=RailAlignedPlacement())
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "<job file>"
        _fail(f"{job_file}: {where}: {first['msg']}")
    except (FabricError, yaml.YAMLError) as error:
        _fail(str(error))
    typer.echo(plan.render(ideal))


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)
