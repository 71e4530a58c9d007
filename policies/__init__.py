"""Pluggable job-sharing policies (filter -> score -> rank per client), found through entry points; profiles
compose a policy from plug-ins (:mod:`policies.profile`)."""

from policies.base import ClientEstimate, JobView, Policy, SchedulingContext
from policies.errors import PolicyOptionError, UnknownPolicyError
from policies.fair_share import FairSharePolicy
from policies.fifo import FifoPolicy
from policies.irs import IrsPolicy
from policies.las import LasPolicy
from policies.profile import Profile, ProfileError, load_profile, shipped_profile
from policies.profile_policy import ProfilePolicy
from policies.propius_default import PropiusPolicy
from policies.random_order import RandomOrderPolicy
from policies.registry import (
    ENTRY_POINT_GROUP,
    available_policies,
    configured_policy,
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
    "Profile",
    "ProfileError",
    "ProfilePolicy",
    "PropiusPolicy",
    "RandomOrderPolicy",
    "SchedulingContext",
    "SrsfPolicy",
    "UnknownPolicyError",
    "available_policies",
    "configured_policy",
    "load_policy",
    "load_profile",
    "parse_options",
    "shipped_profile",
]
