"""The CCL-Bench workload card (version 1): the YAML that tells a reader what ran, on what, and how.

The card is a user-facing artifact read by other people's tools, so it is one pydantic model: the
exporter cannot write a card the validator would reject, and the validator lists every missing or
mistyped field at once (pydantic reports them all). Every field of the toolkit's
``workload_card_template.yaml`` is required; one that does not apply to a FL job (``hf_url``, ``seq_len``,
``driver_version`` …) is present and null, so a reader can tell "not applicable" from "forgotten".
Sections accept extra keys because cards from other contributors carry more and stay valid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CARD_VERSION",
    "Card",
    "CommunicationLibrary",
    "DataSection",
    "Framework",
    "Hardware",
    "MetricSource",
    "ModelExecutor",
    "ModelSection",
    "NetworkTopology",
    "Parallelization",
    "Workload",
    "XpuSpec",
    "read_card",
    "write_card",
]

CARD_VERSION = 1
_HEADER = "# CCL-Bench workload card (version 1), written by `propius trace export`.\n"


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ModelSection(_Section):
    phase: str
    moe: bool
    granularity: str = Field(description="what one step is, e.g. model_fwd_bwd_pass; ours: fl_round")
    model_family: str
    precision: str
    epochs: int | None
    iteration: int = Field(ge=0, description="profiled iterations (FL rounds)")
    model_arch: dict[str, Any] | None = None


class DataSection(_Section):
    batch_size: int = Field(ge=0, description="samples processed per iteration, all ranks together")
    seq_len: int | None
    dataset: str


class NetworkTopology(_Section):
    topology: str
    bandwidth_gbps: list[float | None] = Field(min_length=2, max_length=2, description="[scale_out, scale_up]")


class XpuSpec(_Section):
    type: str
    model: str
    total_count: int = Field(ge=0)
    count_per_node: int = Field(ge=0)


class Hardware(_Section):
    network_topo: NetworkTopology
    xpu_spec: XpuSpec
    driver_version: str | None


class Workload(_Section):
    model: ModelSection
    data: DataSection
    hardware: Hardware


class Framework(_Section):
    name: str
    compiler_tool_selection: str | None
    version: str | None = None


class Parallelization(_Section):
    dp_replicate: int = Field(ge=1)
    dp_shard: int = Field(ge=1)
    tp: int = Field(ge=1)
    pp: int = Field(ge=1)
    cp: int = Field(ge=1)
    ep: int = Field(ge=1)
    pp_mb: int = Field(ge=1)


class CommunicationLibrary(_Section):
    name: str
    version: str | None
    env: dict[str, Any] | None = Field(description="the library's environment variables (NCCL_* for NCCL)")


class ModelExecutor(_Section):
    framework: Framework
    model_plan_parallelization: Parallelization
    communication_library: CommunicationLibrary
    protocol_selection: list[str]


class MetricSource(_Section):
    traces: list[str] = Field(min_length=1)
    metrics_specific_trace: list[str] = Field(description="extra traces some metrics need, e.g. memory_trace")


class Card(_Section):
    """A whole card. ``protocol_selection`` lives under ``Model-executor`` as in the toolkit's template;
    a card that has it at the top level is read as if it were there."""

    version: int = CARD_VERSION
    description: str
    hf_url: str | None
    trace_url: str | None
    contributor: str
    contact: str
    workload: Workload
    model_executor: ModelExecutor = Field(alias="Model-executor")
    metric_source: MetricSource
    collection_notes: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _hoisted_protocol(cls, data: Any) -> Any:
        if isinstance(data, dict) and "protocol_selection" in data and isinstance(data.get("Model-executor"), dict):
            executor = data["Model-executor"]
            if "protocol_selection" not in executor:
                data = {**data, "Model-executor": {**executor, "protocol_selection": data["protocol_selection"]}}
        return data


def write_card(card: Card, path: Path) -> None:
    body = yaml.safe_dump(card.model_dump(mode="json", by_alias=True), sort_keys=False,
                          allow_unicode=True, width=110)
    path.write_text(_HEADER + body)


def read_card(path: Path) -> Card:
    """Raises ``yaml.YAMLError`` or ``pydantic.ValidationError``; the validator turns both into problems."""
    return Card.model_validate(yaml.safe_load(path.read_text()))
