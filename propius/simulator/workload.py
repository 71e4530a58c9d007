"""Workload files (``workloads/*.yaml``): the jobs a simulation runs, validated by pydantic.

A workload job is a :class:`~propius.specs.JobSpec` plus what only a simulation needs: when it
arrives and the shape of its task (model size, local steps, batch size) that the time model turns
into seconds. ``to_job_spec`` hands the control plane's own spec to the matching code, so bind
targets and eligibility classes are computed exactly as in the live system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from propius.simulator.population import MAX_CLIENTS
from propius.specs import JobSpec, Requirements, SpecError, TaskConfig, describe_validation_error

__all__ = ["WORKLOAD_DIR", "Workload", "WorkloadJob", "builtin_workloads", "load_workload"]

WORKLOAD_DIR = Path(__file__).parent / "data" / "workloads"
ClientCount = Annotated[int, Field(ge=1, le=MAX_CLIENTS)]


class WorkloadJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128)
    owner: str | None = Field(default=None, description="tenant; default: the job's own name")
    arrival_s: float = Field(ge=0)
    demand: int = Field(ge=1)
    rounds: int = Field(ge=1)
    over_selection: float = Field(default=1.3, ge=1.0, le=10.0)
    schedule_timeout_s: float = Field(gt=0)
    execution_timeout_s: float = Field(gt=0)
    model: str = "mlp"
    model_size_kbit: float = Field(gt=0)
    local_steps: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    priority: float = 0.0
    requirements: Requirements = Field(default_factory=Requirements)

    def to_job_spec(self) -> JobSpec:
        return JobSpec(
            name=self.name, owner=self.owner or self.name, rounds=self.rounds, demand=self.demand,
            over_selection=self.over_selection, schedule_timeout_s=self.schedule_timeout_s,
            execution_timeout_s=self.execution_timeout_s, priority=self.priority, requirements=self.requirements,
            task=TaskConfig(model=self.model, local_steps=self.local_steps, batch_size=self.batch_size),
        )


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    clients: ClientCount | Annotated[list[ClientCount], Field(min_length=1)] = Field(
        description="client count(s) the workload is meant for")
    time_model: dict[str, str] = Field(default_factory=dict, description="documentation only")
    jobs: list[WorkloadJob] = Field(min_length=1)

    @field_validator("jobs")
    @classmethod
    def _names_are_unique(cls, jobs: list[WorkloadJob]) -> list[WorkloadJob]:
        """A job's name is its id, in the simulator as in the control plane."""
        seen: set[str] = set()
        for job in jobs:
            if job.name in seen:
                raise ValueError(f"two jobs are named {job.name!r}")
            seen.add(job.name)
        return jobs

    @property
    def client_counts(self) -> list[int]:
        return [self.clients] if isinstance(self.clients, int) else list(self.clients)


def builtin_workloads() -> list[str]:
    """The names of the packaged workloads, which ``load_workload`` takes instead of a path."""
    return sorted(path.stem for path in WORKLOAD_DIR.glob("*.yaml"))


def load_workload(path: str | Path) -> Workload:
    """A workload from a YAML path, or by name (``policy-20jobs``) from the packaged workloads.

    Raises SpecError (naming the built-in workloads when ``path`` is neither a file nor one of them) or OSError.
    """
    file = Path(path)
    if not file.exists() and (WORKLOAD_DIR / f"{path}.yaml").exists():
        file = WORKLOAD_DIR / f"{path}.yaml"
    if not file.exists():
        raise SpecError("workload", f"no file {str(path)!r} and no built-in workload of that name; built-in: "
                                    + ", ".join(builtin_workloads()))
    try:
        return Workload.model_validate(yaml.safe_load(file.read_text()))
    except yaml.YAMLError as error:
        raise SpecError("<yaml>", str(error)) from None
    except ValidationError as error:
        raise describe_validation_error(error) from None
