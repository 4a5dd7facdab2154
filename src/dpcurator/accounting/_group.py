"""Group privacy: what an (epsilon, delta)-DP release promises about datasets k entries apart."""

from __future__ import annotations

import math

from dpcurator._validation import check_delta, check_epsilon, check_integer
from dpcurator.accounting._budget import Budget
from dpcurator.errors import InvalidParameterError

__all__ = ["group_privacy"]


def group_privacy(epsilon: float, delta: float, k: int) -> Budget:
    r"""Return the guarantee of an (epsilon, delta)-DP mechanism for datasets k entries apart.

    If M is (epsilon, delta)-DP and D, D' differ in k entries (k neighbour steps, under the
    mechanism's own neighbour relation), then for every set of outputs S

    .. math:: \Pr[M(D) \in S] \le e^{k\epsilon}\Pr[M(D') \in S]
              + \delta\,\frac{e^{k\epsilon} - 1}{e^{\epsilon} - 1}

    (lecture 002, "Group Privacy"; Dwork and Roth 2014, Theorem 2.2, for delta = 0). Proof:
    walk from D to D' through k - 1 intermediate datasets, one neighbour step at a time; each
    step multiplies by :math:`e^\epsilon` and adds delta, which sums to
    :math:`\delta(1 + e^\epsilon + \dots + e^{(k-1)\epsilon})`. For ``delta = 0`` this is
    :math:`(k\epsilon, 0)`; for ``epsilon = 0`` the sum is :math:`k\delta`; ``k = 1`` returns the
    input.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, >= 0.
    delta : float
        The mechanism's delta, in [0, 1).
    k : int
        Group size (number of entries in which the datasets differ), >= 1.

    Returns
    -------
    Budget
        ``Budget(k * epsilon, delta * (e^{k eps} - 1) / (e^eps - 1))``.

    Raises
    ------
    InvalidParameterError
        For bad parameters, or when the group delta reaches 1 (the guarantee says nothing).

    Examples
    --------
    >>> from dpcurator.accounting._group import group_privacy
    >>> group_privacy(0.5, 0.0, 3)
    Budget(epsilon=1.5, delta=0.0)
    >>> g = group_privacy(0.5, 1e-6, 3)
    >>> round(g.delta / 1e-6, 6)  # 1 + e^0.5 + e^1
    5.367003
    """
    epsilon = check_epsilon(epsilon, allow_zero=True)
    delta = check_delta(delta)
    k = check_integer(k, "k", minimum=1)
    if k == 1 or delta == 0.0:
        return Budget(k * epsilon, delta)
    # (e^{k eps} - 1) / (e^eps - 1) = e^{(k-1) eps} (1 - e^{-k eps}) / (1 - e^{-eps}): accurate for
    # small eps (expm1) and free of overflow once e^{(k-1) eps} delta < 1 (else delta' >= 1).
    if epsilon == 0.0:
        group_delta = k * delta
    elif (k - 1) * epsilon + math.log(delta) >= 0.0:
        group_delta = math.inf
    else:
        factor = math.exp((k - 1) * epsilon) * math.expm1(-k * epsilon) / math.expm1(-epsilon)
        group_delta = delta * factor
    if group_delta >= 1.0:
        raise InvalidParameterError(
            "k",
            k,
            "makes the group delta, delta (e^(k epsilon) - 1) / (e^epsilon - 1), reach 1 for "
            f"epsilon={epsilon!r} and delta={delta!r} (a guarantee that says nothing); use a "
            "smaller group, or a mechanism with smaller epsilon or delta",
        )
    return Budget(k * epsilon, group_delta)
