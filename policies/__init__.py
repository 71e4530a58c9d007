"""Pluggable job-sharing policies (filter -> score -> rank per client), found through entry points."""

from policies.base import JobView, Policy, SchedulingContext
from policies.fifo import FifoPolicy
from policies.random_order import RandomOrderPolicy
from policies.registry import ENTRY_POINT_GROUP, UnknownPolicyError, available_policies, load_policy
from policies.srsf import SrsfPolicy

__all__ = [
    "ENTRY_POINT_GROUP",
    "FifoPolicy",
    "JobView",
    "Policy",
    "RandomOrderPolicy",
    "SchedulingContext",
    "SrsfPolicy",
    "UnknownPolicyError",
    "available_policies",
    "load_policy",
]
