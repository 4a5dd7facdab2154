"""Census-style hierarchical releases: consistent, non-negative, integral counts.

A statistics office publishes counts at every level of a hierarchy (nation > state > county;
month > origin > destination), possibly by an attribute (race). Noise added independently at
each level makes levels disagree and produces negative and fractional counts; post-processing
repairs that without touching privacy (it reads only the noisy counts and public constraints).

- Declare and run a release: :class:`HierarchySpec` (in Python or TOML, :func:`read_spec`; the
  data through the curator's declarations and engine, the levels, an attribute, the mechanism,
  the budget and its split over levels, invariants, domains, the post-processing methods),
  :func:`release_hierarchy` -> :class:`HierarchicalRelease` (noisy and post-processed tables,
  privacy events, CSV/Parquet output); the true counts in one ``GROUP BY ROLLUP``
  (:func:`count_hierarchy`, :class:`TrueCounts`). ``dpcurator release census.toml`` runs it.
- The noise step: :func:`add_level_noise` (geometric for pure DP, discrete Gaussian for zCDP),
  :func:`split_budget`, :class:`NoisyLevels`, :class:`LevelNoise`, :data:`MECHANISMS` and the
  geometric helpers (:func:`geometric_scale`, :func:`geometric_alpha`,
  :func:`geometric_variance`, :func:`geometric_pmf`).
- Post-processing on a :class:`Tree` with integer :class:`Domains` (:func:`domains`:
  non-negativity, upper bounds, a public total, fixed nodes, faithfulness windows):
  :func:`postprocess` with ``method`` in :data:`METHODS`: ``"exact"`` (the integer optimum of
  ``sum w (x - noisy)^2``, warm-started from least squares within the bounds and proven
  optimal by an O(N)
  certificate), ``"dp"`` (the lectures' dynamic program over convex cost tables), ``"greedy"``
  (lazy greedy descent), ``"least_squares"`` (Hay et al.'s two passes, generalised),
  ``"relaxed"`` (the continuous QP rounded: reports its violations) and ``"topdown"``
  (TopDown-style, parent by parent); :class:`Solution`, :class:`Violations`,
  :func:`certify`, :func:`objective`, :func:`violations`, :func:`least_squares`,
  :func:`feasible_intervals`.
- Constraint-based DP (the lectures' general form): :func:`project` onto linear equalities and
  inequalities through OSQP (the ``optimize`` extra), :class:`Projection`,
  :func:`relaxed_tree_qp` (:func:`relaxed_tree_projection` with the solver status),
  :func:`consistency_matrix`.
- Count-of-counts (groups of each size per region: households by size, trips per vehicle):
  :class:`CountOfCounts`, :func:`encode` (histogram ``H``, Delta 2; cumulative ``Hc``,
  Delta 1: :data:`ENCODINGS`, :func:`encoding_sensitivity`), :func:`add_count_of_counts_noise`,
  :func:`isotonic_regression`, :func:`histograms_from_cumulative`,
  :func:`postprocess_count_of_counts`, :class:`CellTree`, :class:`NoisyCountOfCounts`,
  :class:`CountOfCountsEstimate`, :func:`level_distances`, :class:`LevelDistance`.
- Errors: :func:`level_errors` (:class:`LevelError`), :func:`earth_movers_distance`; the
  report: :func:`render_report`, :func:`measured_errors`, :func:`expected_abs_error`,
  :func:`error_by_epsilon`, :func:`plot_error_by_epsilon`.

References
----------
F. Fioretto, P. Van Hentenryck, K. Zhu, "Differential privacy of hierarchical census data: an
optimization approach", CP 2019 / Artificial Intelligence 296 (2021). M. Hay, V. Rastogi,
G. Miklau, D. Suciu, "Boosting the accuracy of differentially private histograms through
consistency", PVLDB 3(1), 2010. Y.-H. Kuo, C.-C. Chiu, D. Kifer, M. Hay, A. Machanavajjhala,
"Differentially private hierarchical count-of-counts histograms", PVLDB 11(11), 2018. J. Abowd
et al., "The 2020 Census Disclosure Avoidance System TopDown Algorithm", HDSR 2022.

Examples
--------
The lectures' example: the US is measured at 2, Georgia at 3 and Michigan at 0; the consistent
non-negative integer release closest to the noisy counts:

>>> from dpcurator.hierarchy import Tree, postprocess
>>> tree = Tree.from_paths([("GA",), ("MI",)])
>>> solution = postprocess(tree, [2, 3, 0], method="exact")
>>> solution.values.tolist(), solution.objective, solution.violations.total
([2, 2, 0], 1.0, 0)
"""

from __future__ import annotations

from dpcurator.errors import InfeasibleConstraintsError
from dpcurator.hierarchy._count_of_counts import (
    ENCODINGS,
    CellTree,
    CountOfCounts,
    CountOfCountsEstimate,
    LevelDistance,
    NoisyCountOfCounts,
    add_count_of_counts_noise,
    encode,
    encoding_sensitivity,
    histograms_from_cumulative,
    isotonic_regression,
    level_distances,
    postprocess_count_of_counts,
)
from dpcurator.hierarchy._domains import (
    MAX_COUNT,
    UNBOUNDED,
    Domains,
    domains,
    feasible_intervals,
)
from dpcurator.hierarchy._least_squares import least_squares
from dpcurator.hierarchy._metrics import LevelError, earth_movers_distance, level_errors
from dpcurator.hierarchy._noise import (
    MECHANISMS,
    LevelNoise,
    NoisyLevels,
    add_level_noise,
    geometric_alpha,
    geometric_pmf,
    geometric_scale,
    geometric_variance,
    split_budget,
)
from dpcurator.hierarchy._postprocess import (
    METHODS,
    Solution,
    Violations,
    certify,
    objective,
    postprocess,
    violations,
)
from dpcurator.hierarchy._qp import (
    Projection,
    consistency_matrix,
    project,
    relaxed_tree_projection,
    relaxed_tree_qp,
)
from dpcurator.hierarchy._release import (
    HierarchicalRelease,
    TrueCounts,
    count_hierarchy,
    release_hierarchy,
)
from dpcurator.hierarchy._report import (
    error_by_epsilon,
    expected_abs_error,
    measured_errors,
    plot_error_by_epsilon,
    render_report,
)
from dpcurator.hierarchy._spec import TOTAL, HierarchySpec, read_spec
from dpcurator.hierarchy._tree import Tree

__all__ = [
    "ENCODINGS",
    "MAX_COUNT",
    "MECHANISMS",
    "METHODS",
    "TOTAL",
    "UNBOUNDED",
    "CellTree",
    "CountOfCounts",
    "CountOfCountsEstimate",
    "Domains",
    "HierarchicalRelease",
    "HierarchySpec",
    "InfeasibleConstraintsError",
    "LevelDistance",
    "LevelError",
    "LevelNoise",
    "NoisyCountOfCounts",
    "NoisyLevels",
    "Projection",
    "Solution",
    "Tree",
    "TrueCounts",
    "Violations",
    "add_count_of_counts_noise",
    "add_level_noise",
    "certify",
    "consistency_matrix",
    "count_hierarchy",
    "domains",
    "earth_movers_distance",
    "encode",
    "encoding_sensitivity",
    "error_by_epsilon",
    "expected_abs_error",
    "feasible_intervals",
    "geometric_alpha",
    "geometric_pmf",
    "geometric_scale",
    "geometric_variance",
    "histograms_from_cumulative",
    "isotonic_regression",
    "least_squares",
    "level_distances",
    "level_errors",
    "measured_errors",
    "objective",
    "plot_error_by_epsilon",
    "postprocess",
    "postprocess_count_of_counts",
    "project",
    "read_spec",
    "relaxed_tree_projection",
    "relaxed_tree_qp",
    "release_hierarchy",
    "render_report",
    "split_budget",
    "violations",
]
