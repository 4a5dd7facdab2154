"""Local differential privacy: each device randomises its own answer before sending it."""

from __future__ import annotations

from dpcurator.local._protocol import FrequencyEstimate, FrequencyOracle

__all__ = ["FrequencyEstimate", "FrequencyOracle"]
