"""Value types for policy constructor options, with the ranges outside which an option means nothing.

A constructor annotates its parameters with them; :func:`policies.registry.load_policy` validates an
operator's options (``--policy-option``, ``PROPIUS_POLICY_OPTIONS``) against the annotations, so a
negative slack or a fraction above one is refused with the option's name rather than run.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["AtLeastOne", "Fraction", "NonNegative", "Positive"]

AtLeastOne = Annotated[float, Field(ge=1.0)]  # a factor on a quantity that may not shrink it
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
Positive = Annotated[float, Field(gt=0.0)]
