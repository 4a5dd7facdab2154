r"""Pick the frequency protocol with the lowest variance for a domain size and epsilon.

Wang, Blocki, Li and Jha (USENIX Security 2017, Section 5) compare the approximate variances
``Var*`` (the count-independent term, per report) of the pure protocols:

.. math::

    \mathrm{GRR}: \frac{e^\epsilon + d - 2}{(e^\epsilon - 1)^2}, \quad
    \mathrm{OUE},\ \mathrm{OLH}_{g = e^\epsilon + 1}: \frac{4 e^\epsilon}{(e^\epsilon - 1)^2},

so GRR is better exactly when ``e^eps + d - 2 < 4 e^eps``, i.e. ``d < 3 e^eps + 2``. OUE and OLH
tie (OLH's integer ``g`` makes it very slightly worse); OUE sends ``d`` bits per device (the
server sums ``n d`` bits), OLH sends a seed and ``log2 g`` bits (the server evaluates ``n d``
hashes).
"""

from __future__ import annotations

import math
from typing import Literal

from dpcurator._validation import check_epsilon, check_integer
from dpcurator.errors import InvalidParameterError
from dpcurator.local._grr import GeneralizedRandomizedResponse, exp_or_inf
from dpcurator.local._hadamard import _relative_variance, hadamard_blocks
from dpcurator.local._olh import OptimizedLocalHashing
from dpcurator.local._protocol import FrequencyOracle
from dpcurator.local._unary import OptimizedUnaryEncoding

__all__ = ["approximate_variances", "choose_protocol"]

Preference = Literal["variance", "communication"]


def approximate_variances(epsilon: float, domain_size: int) -> dict[str, float]:
    r"""``Var*`` per report of each protocol: the variance of a count is ``n`` times it.

    Closed forms from research note D (Wang et al. 2017, Table 1 and Section 4; Acharya, Sun
    and Zhang 2019 for HR), with ``E = e^eps``: GRR ``(E + d - 2)/(E - 1)^2``; SUE
    ``e^{eps/2}/(e^{eps/2} - 1)^2``; OUE ``4E/(E - 1)^2``; OLH with ``g = round(E + 1)``
    ``(E - 1 + g)^2 / ((E - 1)^2 (g - 1))``; BLH ``(E + 1)^2/(E - 1)^2``; HR with ``B`` blocks
    (:func:`~dpcurator.local._hadamard.hadamard_blocks`) ``(2B - 1 + E)^2 / (B (E - 1)^2)``.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.

    Returns
    -------
    dict of str to float
        Keys ``"grr"``, ``"sue"``, ``"oue"``, ``"olh"``, ``"blh"``, ``"hadamard"``.

    Examples
    --------
    >>> from dpcurator.local._choose import approximate_variances
    >>> v = approximate_variances(1.0, 10)
    >>> min(v, key=v.__getitem__)  # d = 10 < 3e + 2 = 10.15
    'grr'
    >>> round(v["oue"], 4)
    3.6827
    """
    eps = check_epsilon(epsilon)
    d = check_integer(domain_size, "domain_size", minimum=2)
    e = exp_or_inf(eps)
    if not math.isfinite(e):
        return {name: 0.0 for name in ("grr", "sue", "oue", "olh", "blh", "hadamard")}
    em1 = math.expm1(eps)
    half = math.exp(eps / 2.0)
    g = max(2, round(e + 1.0))
    return {
        "grr": (e + d - 2) / em1**2,
        "sue": half / math.expm1(eps / 2.0) ** 2,
        "oue": 4.0 * e / em1**2,
        "olh": (em1 + g) ** 2 / (em1**2 * (g - 1)),
        "blh": (e + 1.0) ** 2 / em1**2,
        "hadamard": _relative_variance(hadamard_blocks(eps, d), e),
    }


def choose_protocol(
    epsilon: float, domain_size: int, *, prefer: Preference = "variance"
) -> FrequencyOracle:
    r"""Return the frequency protocol with the lowest variance for ``epsilon`` and ``d``.

    Rule (Wang et al. 2017, Section 5): :class:`GeneralizedRandomizedResponse` when
    ``d < 3 e^eps + 2`` (strictly; it is then also the cheapest to send, ``log2 d`` bits);
    otherwise OUE and OLH have the same ``Var* = 4 e^eps / (e^eps - 1)^2`` per report and the
    tie is broken by ``prefer``: ``"variance"`` gives :class:`OptimizedUnaryEncoding` (exactly
    the minimum; ``d`` bits per report, summed bitwise by the server),
    ``"communication"`` gives :class:`OptimizedLocalHashing` (a seed and ``log2 g`` bits per
    report, within a fraction of a percent of OUE's variance, ``O(n d)`` hash evaluations to
    decode).

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.
    prefer : {"variance", "communication"}, default "variance"
        Tie-break between OUE and OLH for large domains.

    Returns
    -------
    FrequencyOracle

    Examples
    --------
    >>> from dpcurator.local._choose import choose_protocol
    >>> choose_protocol(1.0, 10)  # 10 < 3e + 2 = 10.15
    GeneralizedRandomizedResponse(epsilon=1, domain_size=10)
    >>> choose_protocol(1.0, 11)
    OptimizedUnaryEncoding(epsilon=1, domain_size=11)
    >>> choose_protocol(1.0, 1000, prefer="communication")
    OptimizedLocalHashing(epsilon=1, domain_size=1000, g=4)
    """
    eps = check_epsilon(epsilon)
    d = check_integer(domain_size, "domain_size", minimum=2)
    if prefer not in ("variance", "communication"):
        raise InvalidParameterError("prefer", prefer, "must be 'variance' or 'communication'")
    if d < 3.0 * exp_or_inf(eps) + 2.0:
        return GeneralizedRandomizedResponse(eps, d)
    if prefer == "variance":
        return OptimizedUnaryEncoding(eps, d)
    return OptimizedLocalHashing(eps, d)
