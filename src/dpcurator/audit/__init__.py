"""Empirical privacy auditing: certified lower bounds on the epsilon of any mechanism.

An audit never proves privacy; it can refute a claim. Run the mechanism many times on two
neighbouring inputs, find an event whose probability changes more than ``e^eps`` allows, and
bound the change with Clopper-Pearson intervals: a certified lower bound above the claimed epsilon
is a bug (too little noise, a wrong sensitivity, a forgotten composition, floating-point noise).
A bound close to the claim shows that the claim is tight and the audit has power.

- Lower bounds from many runs: :func:`audit_mechanism` (any callable mechanism, neighbouring
  inputs, pure or (epsilon, delta); the distinguishing event is chosen automatically on a
  separate split of runs from those that certify: thresholds as in DP-Sniper, histogram bins and
  values by estimated likelihood ratio, floating-point granularity, a classifier score for
  vectors), :func:`audit_samples` (the same on outputs already drawn), :class:`AuditResult`,
  :class:`Event` (your own events), :data:`EVENT_FAMILIES`; the arithmetic:
  :func:`clopper_pearson`, :func:`epsilon_lower_bound`, :func:`delta_lower_bound`.
- One run (Steinke, Nasr and Jagielski 2023): :func:`canary_audit` (draws which canaries are in,
  runs once, guesses, certifies), :func:`score_canaries` (from scores of a run made elsewhere,
  e.g. DP-SGD), :func:`one_run_epsilon_lower_bound`, :func:`one_run_p_value`,
  :class:`CanaryAudit`; for DP-SGD, :func:`audit_dpsgd` with white-box gradient canaries
  (:class:`DPSGDAudit`; needs PyTorch).
- The suite of the project's mechanisms: :func:`run_audit_suite`, :func:`audit_case`,
  :class:`AuditCase`, :class:`SuiteResult`, :data:`AUDIT_CASES`, :func:`register_audit_case`
  (``dpcurator audit`` prints it), and the one-run cases (:data:`ONE_RUN_CASES`,
  :class:`OneRunCase`, :func:`suite_case_names`).

References
----------
B. Bichsel, S. Steffen, I. Bogunovic, M. Vechev, "DP-Sniper: black-box discovery of differential
privacy violations using classifiers", IEEE S&P 2021. P. Kairouz, S. Oh, P. Viswanath, "The
composition theorem for differential privacy", ICML 2015. J. Lokna, A. Paradis, D. I. Dimitrov,
M. Vechev, "Group and attack: auditing differential privacy", CCS 2023. T. Steinke, M. Nasr,
M. Jagielski, "Privacy auditing with one (1) training run", NeurIPS 2023. I. Mironov, "On
significance of the least significant bits for differential privacy", CCS 2012.

Examples
--------
A "counting" mechanism that claims epsilon = 1 but was given sensitivity 1 for a query that moves
by 2 between neighbours:

>>> import numpy as np
>>> from dpcurator.mechanisms import laplace_mechanism
>>> from dpcurator.noise import InsecureSeededSource
>>> src = InsecureSeededSource(0)
>>> def doubled_count(count, size):
...     return laplace_mechanism(np.full(size, 2.0 * count), epsilon=1.0, sensitivity=1.0,
...                              changed_coordinates=1, source=src).value
>>> result = audit_mechanism(doubled_count, 10, 11, samples=20_000, batched=True)
>>> result.refutes(1.0)
True
"""

from __future__ import annotations

import importlib
from typing import Any

from dpcurator.audit._canary import (
    CanaryAudit,
    canary_audit,
    one_run_epsilon_lower_bound,
    one_run_p_value,
    score_canaries,
)
from dpcurator.audit._lower_bound import (
    EVENT_FAMILIES,
    AuditResult,
    audit_mechanism,
    audit_samples,
    clopper_pearson,
    delta_lower_bound,
    epsilon_lower_bound,
)
from dpcurator.audit._selection import Event
from dpcurator.audit._suite import (
    AUDIT_CASES,
    ONE_RUN_CASES,
    AuditCase,
    OneRunCase,
    SuiteResult,
    audit_case,
    register_audit_case,
    run_audit_suite,
    suite_case_names,
)
from dpcurator.errors import UnsupportedError

_LAZY = {"DPSGDAudit": "_dpsgd", "audit_dpsgd": "_dpsgd"}


def __getattr__(name: str) -> Any:
    """Import the PyTorch parts on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'dpcurator.audit' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"dpcurator.audit.{_LAZY[name]}")
    except ImportError as error:
        raise UnsupportedError(
            f"{name} needs PyTorch (pip install 'dpcurator[learn]'; torch==2.13.0): {error}"
        ) from error
    return getattr(module, name)


__all__ = [
    "AUDIT_CASES",
    "EVENT_FAMILIES",
    "ONE_RUN_CASES",
    "AuditCase",
    "AuditResult",
    "CanaryAudit",
    "DPSGDAudit",
    "Event",
    "OneRunCase",
    "SuiteResult",
    "audit_case",
    "audit_dpsgd",
    "audit_mechanism",
    "audit_samples",
    "canary_audit",
    "clopper_pearson",
    "delta_lower_bound",
    "epsilon_lower_bound",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
    "register_audit_case",
    "run_audit_suite",
    "score_canaries",
    "suite_case_names",
]
