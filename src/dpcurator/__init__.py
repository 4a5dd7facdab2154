"""dpcurator: differential privacy you can prove and afford.

Layers (each imports only from the ones above it in this list):

- :mod:`dpcurator.noise`: the only code that draws random bits. A cryptographically secure
  source by default, exact samplers on integers and rationals (discrete Laplace, discrete
  Gaussian, Bernoulli(exp(-gamma)) ...), and the 2^-k grid that real-valued releases use.
- :mod:`dpcurator.accounting`: privacy as data. Events say what was released; accountants (basic,
  advanced, optimal homogeneous, RDP, zCDP, PLD) turn them into (epsilon, delta); budgets are
  filters that refuse a release before any noise is drawn.
- :mod:`dpcurator.mechanisms`: randomized response, Laplace/geometric, Gaussian, exponential
  mechanism, report-noisy-max, sparse vector. Each release returns its value, its privacy event
  and its error model.

Importing a package is cheap: heavy dependencies (SciPy, pandas, scikit-learn, PyTorch) are
imported when the names that need them are first used.

Examples
--------
>>> import dpcurator
>>> dpcurator.Budget(epsilon=1.0, delta=1e-6).epsilon
1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpcurator._lazy import lazy_exports
from dpcurator.errors import (
    BudgetExceededError,
    DPError,
    InfeasibleConstraintsError,
    InternalError,
    InvalidParameterError,
    MissingDependencyError,
    PrivacyWarning,
    QueryError,
    QueryFailedError,
    UnsupportedError,
    UnsupportedEventError,
)

__version__ = "0.1.0"
"""The version: written here only; the package metadata reads it (pyproject.toml)."""

# Imported when first used, so that ``import dpcurator`` loads no SciPy (dpcurator._lazy).
_EXPORTS: dict[str, str] = {"Budget": "dpcurator.accounting"}

if TYPE_CHECKING:
    from dpcurator.accounting import Budget
else:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, namespace=globals())

__all__ = [
    "Budget",
    "BudgetExceededError",
    "DPError",
    "InfeasibleConstraintsError",
    "InternalError",
    "InvalidParameterError",
    "MissingDependencyError",
    "PrivacyWarning",
    "QueryError",
    "QueryFailedError",
    "UnsupportedError",
    "UnsupportedEventError",
    "__version__",
]
