"""Pluggable job-sharing policies (filter -> score -> rank per client), found through entry points."""

from policies.base import ClientEstimate, JobView, Policy, SchedulingContext
from policies.fair_share import FairSharePolicy
from policies.fifo import FifoPolicy
from policies.irs import IrsPolicy
from policies.las import LasPolicy
from policies.propius_default import PropiusPolicy
from policies.random_order import RandomOrderPolicy
from policies.registry import (
    ENTRY_POINT_GROUP,
    PolicyOptionError,
    UnknownPolicyError,
    available_policies,
    load_policy,
    parse_options,
)
from policies.srsf import SrsfPolicy

__all__ = [
    "ENTRY_POINT_GROUP",
    "ClientEstimate",
    "FairSharePolicy",
    "FifoPolicy",
    "IrsPolicy",
    "JobView",
    "LasPolicy",
    "Policy",
    "PolicyOptionError",
    "PropiusPolicy",
    "RandomOrderPolicy",
    "SchedulingContext",
    "SrsfPolicy",
    "UnknownPolicyError",
    "available_policies",
    "load_policy",
    "parse_options",
]
