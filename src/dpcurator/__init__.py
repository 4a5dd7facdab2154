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

Examples
--------
>>> import dpcurator
>>> dpcurator.Budget(epsilon=1.0, delta=1e-6).epsilon
1.0
"""

from __future__ import annotations

from dpcurator.accounting import Budget
from dpcurator.errors import (
    BudgetExceededError,
    DPError,
    InfeasibleConstraintsError,
    InternalError,
    InvalidParameterError,
    QueryError,
    QueryFailedError,
    UnsupportedError,
    UnsupportedEventError,
)

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "BudgetExceededError",
    "DPError",
    "InfeasibleConstraintsError",
    "InternalError",
    "InvalidParameterError",
    "QueryError",
    "QueryFailedError",
    "UnsupportedError",
    "UnsupportedEventError",
    "__version__",
]
