"""User-facing specs: the single source of truth for what a job asks for and what a client offers.

The same models validate a YAML file on the user's machine, the JSON that crosses the wire in
``RegisterJob`` and the private constraints a device evaluates locally, so a spec can never mean one
thing to the SDK and another to the control plane.

Every number has a documented range and every float is finite (JSON's ``NaN``/``Infinity`` are
refused), so a spec the control plane accepts is one it can store, read back and put on the wire
(whose round counters are 32-bit): rounds 1..1,000,000; demand 1..100,000; priority within +/-1e9;
timeouts in (0, 7 days]; local steps and batch size 1..1,000,000; an update's ``num_samples`` in
(0, 1e12]. Names and labels hold no control characters (PostgreSQL text cannot hold NUL).
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel, ValidationError, model_validator

from propius.fabric.request import CloudRequest

__all__ = [
    "MAX_NUM_SAMPLES",
    "AttributeValue",
    "ClientProfile",
    "Constraint",
    "Constraints",
    "DeviceClass",
    "JobSpec",
    "Requirements",
    "SpecError",
    "TaskConfig",
    "describe_validation_error",
]

AttributeValue = float | str

MAX_ROUNDS = 1_000_000
MAX_DEMAND = 100_000
MAX_PRIORITY = 1e9
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_NUM_SAMPLES = 1e12  # an update's weight (UploadUpdate.num_samples): (0, MAX_NUM_SAMPLES]
MAX_OPTION_INT = 2**53  # task options travel as JSON numbers; larger integers lose precision in most parsers

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _printable(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters (NUL, newline, ...)")
    return value


Text = Annotated[str, AfterValidator(_printable)]
"""A string without control characters: it may be stored in SQL (PostgreSQL text cannot hold NUL) and logged."""


class SpecError(ValueError):
    """A spec failed validation; ``field`` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def describe_validation_error(error: ValidationError) -> SpecError:
    """Turn pydantic's error list into one SpecError naming the first bad field."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "<spec>"
    return SpecError(field, first["msg"])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


class DeviceClass(StrEnum):
    EDGE = "edge"
    CLOUD = "cloud"


class Constraint(_Strict):
    """One attribute constraint: a numeric range (``min``/``max``, inclusive) or set membership (``in``)."""

    min: float | None = None
    max: float | None = None
    in_: Annotated[frozenset[Text] | None, Field(alias="in")] = None

    @model_validator(mode="after")
    def _one_kind(self) -> Constraint:
        has_range = self.min is not None or self.max is not None
        if has_range and self.in_ is not None:
            raise ValueError("use either min/max or in, not both")
        if not has_range and self.in_ is None:
            raise ValueError("give min, max or in")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def admits(self, value: AttributeValue | None) -> bool:
        if value is None:
            return False
        if self.in_ is not None:
            return str(value) in self.in_
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return False
        if math.isnan(value):
            return False
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)


class Constraints(RootModel[dict[str, Constraint]]):
    """Attribute name -> constraint; a client satisfies it when every named attribute is admitted."""

    root: dict[str, Constraint] = Field(default_factory=dict)

    def admits(self, attributes: dict[str, AttributeValue]) -> bool:
        return all(c.admits(attributes.get(name)) for name, c in self.root.items())

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, text: str) -> Constraints:
        return cls.model_validate_json(text or "{}")


class Requirements(_Strict):
    """Public constraints are matched by the control plane; private ones only ever run on the device."""

    public: Constraints = Field(default_factory=Constraints)
    private: Constraints = Field(default_factory=Constraints)

    def eligibility_key(self) -> str:
        """Jobs with equal public constraints form one eligibility class."""
        return self.public.to_json()


class TaskConfig(_Strict):
    """What a client's executor runs; ``executor`` names a registered executor plug-in."""

    executor: Text = Field(default="torch-train", max_length=128)
    model: Text = Field(default="mlp", max_length=128)
    local_steps: int = Field(default=10, ge=1, le=1_000_000)
    batch_size: int = Field(default=32, ge=1, le=1_000_000)
    learning_rate: float = Field(default=0.1, gt=0, le=1e6)
    options: dict[Text, bool | Annotated[int, Field(ge=-MAX_OPTION_INT, le=MAX_OPTION_INT)] | float | str] = Field(
        default_factory=dict)

    @property
    def work_samples(self) -> float:
        """Sample passes per task, a backward pass counted as two forward ones (the published time model:
        training seconds = this x seconds per sample pass). The unit in which clients' speeds are learned."""
        return float(self.local_steps * 3 * self.batch_size)


class JobSpec(_Strict):
    """A federated-learning job as a user submits it (``propius submit job.yaml``)."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    owner: Text = Field(default="anonymous", min_length=1, max_length=128)
    rounds: int | None = Field(default=None, ge=1, le=MAX_ROUNDS, description="None: open-ended")
    demand: int = Field(ge=1, le=MAX_DEMAND, description="results wanted per round")
    over_selection: float = Field(default=1.3, ge=1.0, le=10.0)
    min_results: int | None = Field(default=None, ge=1, description="results that close a round; default demand")
    schedule_timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S)
    execution_timeout_s: float = Field(default=180.0, gt=0, le=MAX_TIMEOUT_S)
    priority: float = Field(default=0.0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    requirements: Requirements = Field(default_factory=Requirements)
    task: TaskConfig = Field(default_factory=TaskConfig)
    aggregation: Literal["fedavg", "collect"] = Field(
        default="fedavg",
        description="fedavg: the data plane folds updates into their weighted mean; collect: it hands every "
        "accepted update back whole, for a job whose own server aggregates (a Flower ServerApp)",
    )
    cloud: CloudRequest | None = Field(
        default=None,
        description="accelerators of the cloud fabric for the job (its aggregation tier or training), placed by the "
        "control plane's placement plug-in when the job registers (docs/fabric.md)",
    )

    @model_validator(mode="after")
    def _min_results_fits(self) -> JobSpec:
        if self.min_results is not None and self.min_results > self.demand:
            raise ValueError(f"min_results ({self.min_results}) exceeds demand ({self.demand})")
        return self

    @property
    def results_to_close(self) -> int:
        return self.min_results or self.demand

    def bind_target(self, demand: int) -> int:
        """How many clients may bind for a round of ``demand``: over-selection absorbs stragglers."""
        return max(demand, math.ceil(demand * self.over_selection))

    @classmethod
    def parse(cls, data: dict[str, Any] | str) -> JobSpec:
        """Validate a dict or JSON text; raise SpecError naming the first bad field."""
        try:
            if isinstance(data, str):
                return cls.model_validate_json(data)
            return cls.model_validate(data)
        except ValidationError as error:
            raise describe_validation_error(error) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> JobSpec:
        try:
            data = yaml.safe_load(Path(path).read_text())
        except yaml.YAMLError as error:
            raise SpecError("<yaml>", str(error)) from None
        if not isinstance(data, dict):
            raise SpecError("<yaml>", "expected a mapping at the top level")
        return cls.parse(data)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)


class ClientProfile(_Strict):
    """What a device tells the control plane about itself. Private attributes are not part of it."""

    client_id: Text = Field(default="", max_length=128)
    device_class: DeviceClass = DeviceClass.EDGE
    numeric: dict[Text, float] = Field(default_factory=dict)
    labels: dict[Text, Text] = Field(default_factory=dict)

    def attributes(self) -> dict[str, AttributeValue]:
        """The flat view constraints are evaluated on (``device_class`` included)."""
        merged: dict[str, AttributeValue] = {**self.labels, **self.numeric}
        merged["device_class"] = self.device_class.value
        return merged
