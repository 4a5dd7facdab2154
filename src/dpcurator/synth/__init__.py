"""Differentially private synthetic data from declared tables, charged to the session's ledger.

- :func:`synthesize`: a synthetic table of a declared :class:`~dpcurator.curator.Table` by
  ``method="aim"`` (McKenna et al. 2022, workload-aware), ``"mst"`` (McKenna et al. 2021) or
  ``"independent"`` (the baseline); marginals measured in the curator's engine with its
  contribution bounding (bounded GROUP BYs, read once each), exact discrete Gaussian noise, zCDP
  accounting charged to the session's ledger before any read, graphical-model inference in
  numpy (Private-PGM's mirror descent on a junction tree). Returns :class:`SyntheticData`: the
  table, the noisy marginals (:class:`MeasuredMarginal`) and an error report per marginal.
- :data:`METHODS`: the method names.
- The inference on its own: :func:`fit_model` on noisy :class:`Marginal` s gives a
  :class:`Model` (marginals of any attribute set, synthetic rows).

``dpcurator synth --table t.toml --epsilon 1 --out synth.parquet`` runs it from the command
line.

Examples
--------
>>> import pandas as pd
>>> from dpcurator.accounting import Budget
>>> from dpcurator.curator import Column, Session, Table
>>> from dpcurator.noise import InsecureSeededSource
>>> from dpcurator.synth import synthesize
>>> df = pd.DataFrame({"sex": ["F", "M"] * 100, "smoker": [True, False, False, False] * 50})
>>> t = Table("t", df, columns=[Column("sex", domain=["F", "M"]),
...                             Column("smoker", domain=[True, False])])
>>> with Session(t, Budget(1.0, 1e-6), ledger=":memory:", source=InsecureSeededSource(0)) as s:
...     synth = synthesize(s, epsilon=1.0, method="aim")
...     s.remaining.epsilon
0.0
>>> sorted(synth.table.columns), synth.entry_id
(['sex', 'smoker'], 1)
"""

from __future__ import annotations

from dpcurator.synth._model import Marginal, Model, fit_model
from dpcurator.synth._synthesize import METHODS, MeasuredMarginal, SyntheticData, synthesize

__all__ = [
    "METHODS",
    "Marginal",
    "MeasuredMarginal",
    "Model",
    "SyntheticData",
    "fit_model",
    "synthesize",
]
