"""Suite-wide settings: property tests are reproducible and never time-limited.

Hypothesis draws its examples from a fixed seed (``derandomize``), like every other statistical
test here, and has no per-example deadline: CI machines are small and shared, and speed is
measured in ``benchmarks/``, not in tests.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("dpcurator", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("dpcurator")
