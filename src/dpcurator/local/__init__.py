"""Local differential privacy: each device randomises its own answer before sending it.

No curator is trusted: a protocol object holds epsilon and the domain; ``privatize`` runs on each
device (vectorised to simulate millions), ``aggregate`` on the server, which gets unbiased
frequency estimates with standard errors and confidence intervals. Each protocol's ``event`` is the
privacy event of one report of one device, so repeated reports are accounted by composition.

- Base: :class:`FrequencyOracle`, :class:`FrequencyEstimate`.
- Binary: :class:`BinaryRandomizedResponse` (the lectures' coin, die and ``e^eps/(e^eps+1)``
  versions).
- Categorical (Wang, Blocki, Li and Jha 2017): :class:`GeneralizedRandomizedResponse`,
  :class:`SymmetricUnaryEncoding` (basic RAPPOR), :class:`OptimizedUnaryEncoding`,
  :class:`OptimizedLocalHashing`; :class:`HadamardResponse` (Acharya, Sun and Zhang 2019);
  :func:`choose_protocol` picks the lowest variance for a domain size and epsilon.
- Strings and large domains: :class:`Rappor` (Erlingsson, Pihur and Korolova 2014: Bloom filter,
  permanent and instantaneous randomised response, regression decoding, longitudinal accounting),
  :class:`CountMeanSketch` and :class:`HadamardCountMeanSketch` (Apple 2017),
  :func:`heavy_hitters` (prefix extension).
- Numbers: :class:`DuchiMean` (Duchi, Jordan and Wainwright 2018) and :class:`PiecewiseMean`
  (Wang et al. 2019, on a fine grid), returning :class:`MeanEstimate`.
- Post-processing: :func:`project_counts` (non-negative counts that sum to n).

Examples
--------
>>> from dpcurator.local import GeneralizedRandomizedResponse
>>> from dpcurator.noise import InsecureSeededSource
>>> grr = GeneralizedRandomizedResponse(epsilon=2.0, domain_size=4)
>>> estimate = grr.estimate([0, 1, 1, 3] * 2500, source=InsecureSeededSource(1))
>>> estimate.n, bool(abs(estimate.counts[1] - 5000) < 5 * estimate.std[1])
(10000, True)
"""

from __future__ import annotations

from dpcurator.local._binary import BinaryRandomizedResponse
from dpcurator.local._choose import approximate_variances, choose_protocol
from dpcurator.local._grr import GeneralizedRandomizedResponse
from dpcurator.local._hadamard import HadamardResponse, hadamard_blocks, walsh_hadamard_transform
from dpcurator.local._heavy_hitters import HeavyHitters, heavy_hitters
from dpcurator.local._numeric import DuchiMean, MeanEstimate, PiecewiseMean
from dpcurator.local._olh import LocalHashReports, OptimizedLocalHashing, collision_probability
from dpcurator.local._postprocess import project_counts, project_to_simplex
from dpcurator.local._protocol import FrequencyEstimate, FrequencyOracle
from dpcurator.local._rappor import Rappor, RapporDecoding, RapporReports, RapporSummary
from dpcurator.local._sketch import (
    CountMeanSketch,
    CountMeanSketchReports,
    HadamardCountMeanSketch,
    HadamardSketchReports,
    Sketch,
)
from dpcurator.local._unary import OptimizedUnaryEncoding, SymmetricUnaryEncoding, UnaryEncoding

__all__ = [
    "BinaryRandomizedResponse",
    "CountMeanSketch",
    "CountMeanSketchReports",
    "DuchiMean",
    "FrequencyEstimate",
    "FrequencyOracle",
    "GeneralizedRandomizedResponse",
    "HadamardCountMeanSketch",
    "HadamardResponse",
    "HadamardSketchReports",
    "HeavyHitters",
    "LocalHashReports",
    "MeanEstimate",
    "OptimizedLocalHashing",
    "OptimizedUnaryEncoding",
    "PiecewiseMean",
    "Rappor",
    "RapporDecoding",
    "RapporReports",
    "RapporSummary",
    "Sketch",
    "SymmetricUnaryEncoding",
    "UnaryEncoding",
    "approximate_variances",
    "choose_protocol",
    "collision_probability",
    "hadamard_blocks",
    "heavy_hitters",
    "project_counts",
    "project_to_simplex",
    "walsh_hadamard_transform",
]
