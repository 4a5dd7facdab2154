"""The report of a hierarchical release, and the plot of error by level against epsilon.

The public part of a report says what was done and what error to expect: the declaration, the
budget of each level, and the expected error of each level from the noise model (a function of
the public parameters only). The confidential part, for the data steward only, measures the
error of every method against the true counts, level by level, with the constraint violations:
it reads the truth, so it must never be published.

Examples
--------
>>> from dpcurator.hierarchy._release import release_hierarchy
>>> from dpcurator.hierarchy._spec import HierarchySpec
>>> from dpcurator.noise import InsecureSeededSource
>>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1.0,
...                      name="midwest")
>>> release = release_hierarchy(spec, source=InsecureSeededSource(0))
>>> text = render_report(release)
>>> text.splitlines()[0], "CONFIDENTIAL" in text
('# Hierarchical release: midwest', False)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from dpcurator.errors import UnsupportedError
from dpcurator.hierarchy._metrics import LevelError, level_errors
from dpcurator.hierarchy._noise import LevelNoise
from dpcurator.mechanisms import ErrorModel
from dpcurator.noise import InsecureSeededSource

if TYPE_CHECKING:
    import pandas as pd

    from dpcurator.hierarchy._release import HierarchicalRelease
    from dpcurator.hierarchy._spec import HierarchySpec

__all__ = [
    "error_by_epsilon",
    "expected_abs_error",
    "measured_errors",
    "plot_error_by_epsilon",
    "render_report",
]

_DISTRIBUTION = {"geometric": "discrete_laplace", "discrete_gaussian": "discrete_gaussian"}
_PLOT_EPSILONS = (0.1, 0.5, 1.0, 2.0)
_ERROR_COLUMNS = ("budget", "estimate", "level", "nodes", "mean_abs", "rmse", "max_abs")


def expected_abs_error(level: LevelNoise) -> float:
    """Return the expected absolute error ``E|Z|`` of one noisy count of a level (public).

    Discrete Laplace: ``1 / sinh(1 / lambda)``; discrete Gaussian: summed exactly (see
    :class:`~dpcurator.mechanisms.ErrorModel`).

    Examples
    --------
    >>> from dpcurator.hierarchy._noise import add_level_noise
    >>> step = add_level_noise([[5]], mechanism="geometric", budget=1.0)
    >>> round(expected_abs_error(step.levels[0]), 4)  # 1 / sinh(1)
    0.8509
    """
    model = ErrorModel(_DISTRIBUTION[level.mechanism], noise_scale=level.scale, center=np.zeros(1))
    return model.expected_l1


def measured_errors(release: HierarchicalRelease) -> dict[str, tuple[LevelError, ...]]:
    """CONFIDENTIAL: error per level of the noisy counts and of every method, against the truth.

    Returns
    -------
    dict
        ``"noisy"`` and each method -> :func:`~dpcurator.hierarchy._metrics.level_errors`.

    Examples
    --------
    >>> from dpcurator.hierarchy._release import release_hierarchy
    >>> from dpcurator.hierarchy._spec import HierarchySpec
    >>> from dpcurator.noise import InsecureSeededSource
    >>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1.0,
    ...                      invariants=("total",))
    >>> errors = measured_errors(release_hierarchy(spec, source=InsecureSeededSource(0)))
    >>> sorted(errors), errors["exact"][0].max_abs
    (['exact', 'noisy'], 0.0)
    """
    estimates: dict[str, NDArray[np.int64] | NDArray[np.float64]] = {"noisy": release.noisy}
    estimates.update({m: s.values for m, s in release.solutions.items()})
    return {
        name: level_errors(release.tree, values, release.truth)
        for name, values in estimates.items()
    }


def _number(value: float) -> str:
    return f"{value:,.4g}" if np.isfinite(value) else "-"


def _parameters(release: HierarchicalRelease) -> list[str]:
    spec = release.spec
    source = spec.table.source
    data = source if isinstance(source, str) else type(source).__name__
    unit = f"`{spec.count}` people per row" if spec.count else "one person per row"
    if spec.attribute_counts:
        unit = f"count columns {', '.join(f'`{c}`' for c in spec.attribute_counts)}"
    budget = (
        f"ε = {release.epsilon:.6g} (pure DP, basic composition over levels)"
        if release.epsilon is not None
        else f"ρ = {release.rho:.6g} (zCDP, additive over levels)"
    )
    invariants = ", ".join(spec.invariants) or "none"
    by = ""
    if spec.has_attribute:
        by = f", by `{release.attribute_column}` ({len(release.cells)} cells)"
    lines = [
        f"- Data: `{data}` ({unit})",
        f"- Levels: {' > '.join([spec.root, *spec.levels])}{by}",
        f"- Tree: {release.tree.n_nodes:,} nodes in {release.tree.n_levels} levels",
        f"- Mechanism: {spec.mechanism}; neighbours: add or remove one person "
        "(one unit of count in one leaf cell); L1 = L2 sensitivity 1 per level",
        f"- Budget: {budget}",
        f"- Invariants (public by declaration, released exactly, NOT protected by DP): "
        f"{invariants}",
        f"- Post-processing: {', '.join(spec.methods)}; non-negative: {spec.nonnegative}; "
        f"window: {spec.window if spec.window is not None else 'none'}",
    ]
    return lines


def _noise_table(release: HierarchicalRelease) -> list[str]:
    key = "ε" if release.epsilon is not None else "ρ"
    rows = [
        f"| level | nodes | {key} | noise scale | std | expected abs error |",
        "|---|---|---|---|---|---|",
    ]
    levels = zip(release.level_names, release.tree.level_slices, release.level_noise, strict=True)
    for name, part, level in levels:
        nodes = part.stop - part.start
        if level is None:
            status = "exact (invariant)" if release.variance[part.start] == 0 else "not measured"
            rows.append(f"| {name} | {nodes:,} | - | {status} | 0 | 0 |")
            continue
        rows.append(
            f"| {name} | {nodes:,} | {level.share:.4g} | {level.scale:.4g} | "
            f"{level.std:.4g} | {expected_abs_error(level):.4g} |"
        )
    return rows


def _violations_table(release: HierarchicalRelease) -> list[str]:
    rows = [
        "| method | consistency | domain | invariant | integrality | certified optimal |",
        "|---|---|---|---|---|---|",
    ]
    for method, solution in release.solutions.items():
        v = solution.violations
        certified = "-" if solution.certified is None else str(solution.certified)
        rows.append(
            f"| {method} | {v.consistency} | {v.domain} | {v.invariant} | {v.integrality} | "
            f"{certified} |"
        )
    return rows


def _error_table(release: HierarchicalRelease) -> list[str]:
    rows = ["| level | estimate | mean abs error | RMSE | max abs error |", "|---|---|---|---|---|"]
    errors = measured_errors(release)
    names = release.level_names
    for t in range(release.tree.n_levels):
        for name, levels in errors.items():
            e = levels[t]
            rows.append(
                f"| {names[t]} | {name} | {_number(e.mean_abs)} | {_number(e.rmse)} | "
                f"{_number(e.max_abs)} |"
            )
    return rows


def render_report(release: HierarchicalRelease, *, confidential: bool = False) -> str:
    """Render the Markdown report of a release.

    Parameters
    ----------
    release : HierarchicalRelease
    confidential : bool, default False
        Add the section, marked CONFIDENTIAL, with the error of every method measured
        against the true counts (for the data steward only).

    Returns
    -------
    str
        Markdown: parameters, noise by level (budget share, scale, std, expected absolute
        error: public), constraint violations of each method (public: functions of the release
        and of the public constraints), and, if asked, the measured errors.
    """
    lines = [f"# Hierarchical release: {release.spec.name}", "", *_parameters(release), ""]
    lines += ["## Noise by level (public, from the noise model)", "", *_noise_table(release), ""]
    lines += ["## Constraint violations of each method (public)", ""]
    lines += [*_violations_table(release), ""]
    if confidential:
        lines += [
            "## CONFIDENTIAL: error measured against the true counts",
            "",
            "For the data steward only: these numbers read the confidential data and are not "
            "differentially private. Do not publish them.",
            "",
            *_error_table(release),
            "",
        ]
    return "\n".join(lines)


# -- error against epsilon ----------------------------------------------------------------------
def error_by_epsilon(
    spec: HierarchySpec, epsilons: Sequence[float] = _PLOT_EPSILONS, *, seed: int = 0
) -> pd.DataFrame:
    """CONFIDENTIAL simulation: error per level and method for several budgets.

    Each budget is released once with ``InsecureSeededSource(seed + i)`` (a simulation: the
    noise is reproducible, not secure) and measured against the truth.

    Parameters
    ----------
    spec : HierarchySpec
    epsilons : sequence of float
        Budgets (epsilon, or rho for discrete Gaussian noise).
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        Columns ``budget``, ``estimate`` (``"noisy"`` or a method), ``level``, ``nodes``,
        ``mean_abs``, ``rmse``, ``max_abs``.

    Examples
    --------
    >>> from dpcurator.hierarchy._spec import HierarchySpec
    >>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1)
    >>> frame = error_by_epsilon(spec, [0.5, 1.0])
    >>> frame.shape, sorted(set(frame["estimate"]))
    ((8, 7), ['exact', 'noisy'])
    """
    import pandas as pd  # noqa: PLC0415

    from dpcurator.hierarchy._release import release_hierarchy  # noqa: PLC0415 (cycle)

    rows = []
    for i, budget in enumerate(epsilons):
        release = release_hierarchy(spec.with_budget(budget), source=InsecureSeededSource(seed + i))
        names = release.level_names
        for estimate, errors in measured_errors(release).items():
            rows += [
                {
                    "budget": budget,
                    "estimate": estimate,
                    **dataclasses.asdict(e),
                    "level": names[e.level],
                }
                for e in errors
            ]
    return pd.DataFrame(
        rows, columns=["budget", "estimate", "level", "nodes", "mean_abs", "rmse", "max_abs"]
    )


def plot_error_by_epsilon(
    frame: pd.DataFrame, path: str | os.PathLike[str], *, budget_name: str = "epsilon"
) -> Path:
    """Plot RMSE by level against the budget, one panel per estimate (needs matplotlib).

    Levels released exactly (invariants, error 0) are left out of the log-scale axes.

    Parameters
    ----------
    frame : pandas.DataFrame
        The output of :func:`error_by_epsilon`.
    path : str or path
        The image file to write (PNG, SVG, PDF: by suffix).
    budget_name : str, default "epsilon"
        The label of the budget axis (``"rho"`` for discrete Gaussian noise).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    UnsupportedError
        If matplotlib is not installed (the optional ``plot`` extra).
    """
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise UnsupportedError(
            "The plot needs matplotlib: pip install 'dpcurator[plot]'."
        ) from None
    estimates = list(dict.fromkeys(frame["estimate"]))
    figure, axes = plt.subplots(
        1, len(estimates), figsize=(4 * len(estimates), 3.5), sharey=True, squeeze=False
    )
    for axis, estimate in zip(axes[0], estimates, strict=True):
        part = frame[frame["estimate"] == estimate]
        for level, rows in part.groupby("level", sort=False):
            if (rows["rmse"] > 0).any():  # invariants (exact, error 0) have no place on a log axis
                axis.plot(rows["budget"], rows["rmse"], marker="o", label=str(level))
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(estimate)
        axis.set_xlabel(budget_name)
    axes[0][0].set_ylabel("RMSE per node")
    axes[0][-1].legend(title="level", fontsize="small")
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out)
    plt.close(figure)
    return out
