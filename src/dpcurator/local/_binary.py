"""Binary randomized response (Warner 1965) as a local frequency oracle over ``{0, 1}``.

Three versions: the lectures' ``p = e^eps / (e^eps + 1)`` (lecture 001, "randomized response for
other ratios"), Warner's coin (``p = 3/4``, ln 3; lectures 003 and 004) and the die (``p = 2/3``,
ln 2; lecture 001). The coin and die versions run :mod:`dpcurator.mechanisms`' protocols of the
same names.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from dpcurator.local._grr import GeneralizedRandomizedResponse, check_n
from dpcurator.local._protocol import check_values
from dpcurator.mechanisms import coin_randomized_response, die_randomized_response
from dpcurator.noise import RandomSource, resolve_source

__all__ = ["BinaryRandomizedResponse"]

Variant = Literal["exponential", "coin", "die"]


class BinaryRandomizedResponse(GeneralizedRandomizedResponse):
    r"""Binary randomized response: report the true bit w.p. ``p``, its opposite otherwise.

    With ``p = e^eps / (e^eps + 1)`` (lecture 001), for both inputs and both reports

    .. math:: P[y \mid v] \le \frac{p}{1 - p} P[y \mid v'] = e^\epsilon P[y \mid v'],

    epsilon-LDP (one device changing its bit). ``1 - p`` is rounded *up* to a multiple of
    ``2**-52`` (at least as private; :attr:`event` reports the ``p`` used).

    **Report**: one bit per device. **Estimator** (lecture 001, exercise 2 and proposition): the
    number of ones is estimated by

    .. math:: A = \sum_i (a Y_i - b), \quad a = \frac{e^\epsilon + 1}{e^\epsilon - 1}
        = \frac{1}{2p - 1}, \quad b = \frac{1}{e^\epsilon - 1} = \frac{1 - p}{2p - 1},

    unbiased since ``E[Y_i] = (1 - p) + (2p - 1) x_i``, with exact variance
    ``n p (1 - p) / (2p - 1)^2 = n e^eps / (e^eps - 1)^2`` whatever the data, i.e. RMSE
    ``e^{eps/2} sqrt(n) / (e^eps - 1)`` (about ``2 sqrt(n) / eps`` for small eps). The count of
    zeros is ``n - A``. This is :class:`GeneralizedRandomizedResponse` with ``d = 2`` (whose
    estimator ``(C_1 - n q)/(p - q)`` is exactly ``A``).

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.

    See Also
    --------
    coin : Warner's coin protocol, ``p = 3/4``, ln 3-LDP.
    die : the lecture's die protocol, ``p = 2/3``, ln 2-LDP.

    References
    ----------
    S. L. Warner, "Randomized response: a survey technique for eliminating evasive answer bias",
    JASA 1965. Lecture 001 (randomized response; proposition on the RMSE). Research note D.

    Examples
    --------
    >>> from dpcurator.local._binary import BinaryRandomizedResponse
    >>> from dpcurator.noise import InsecureSeededSource
    >>> rr = BinaryRandomizedResponse(epsilon=1.0)
    >>> reports = rr.privatize([1] * 300 + [0] * 700, source=InsecureSeededSource(0))
    >>> A = rr.estimate_sum(reports)
    >>> bool(abs(A - 300) < 4 * rr.rmse(1000))
    True
    >>> round(rr.rmse(100), 3)  # e^(1/2) sqrt(100) / (e - 1)
    9.595
    """

    name: ClassVar[str] = "binary_rr"

    def __init__(self, epsilon: float) -> None:
        super().__init__(epsilon=epsilon, domain_size=2)
        self.variant: Variant = "exponential"

    @classmethod
    def _fixed(cls, p: Fraction, variant: Variant) -> BinaryRandomizedResponse:
        out = cls.__new__(cls)
        GeneralizedRandomizedResponse.__init__(out, epsilon=math.log(p / (1 - p)), domain_size=2)
        out._set_probability(p)
        out.variant = variant
        return out

    @classmethod
    def coin(cls) -> BinaryRandomizedResponse:
        """Warner's coin: heads, the truth; tails, a second coin answers. ``p = 3/4``, ln 3.

        Privatisation runs :func:`dpcurator.mechanisms.coin_randomized_response` (lectures 003
        and 004, "Have you ever dodged your taxes?").

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._binary import BinaryRandomizedResponse
        >>> coin = BinaryRandomizedResponse.coin()
        >>> coin.p, math.isclose(coin.event.epsilon, math.log(3))
        (Fraction(3, 4), True)
        """
        return cls._fixed(Fraction(3, 4), "coin")

    @classmethod
    def die(cls) -> BinaryRandomizedResponse:
        """Build the lecture's die: 1-4, the truth; 5 or 6, the opposite. ``p = 2/3``, ln 2.

        Privatisation runs :func:`dpcurator.mechanisms.die_randomized_response` (lecture 001).

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._binary import BinaryRandomizedResponse
        >>> die = BinaryRandomizedResponse.die()
        >>> die.p, math.isclose(die.event.epsilon, math.log(2))
        (Fraction(2, 3), True)
        """
        return cls._fixed(Fraction(2, 3), "die")

    @property
    def a(self) -> float:
        """The estimator's slope ``1 / (2p - 1) = (e^eps + 1) / (e^eps - 1)``."""
        return float(1 / (2 * self.p - 1))

    @property
    def b(self) -> float:
        """The estimator's offset ``(1 - p) / (2p - 1) = 1 / (e^eps - 1)``."""
        return float((1 - self.p) / (2 * self.p - 1))

    def privatize(self, values: object, *, source: RandomSource | None = None) -> NDArray[np.int64]:
        """Randomise each device's bit (0/1 or bool); returns 0/1 reports.

        Examples
        --------
        >>> from dpcurator.local._binary import BinaryRandomizedResponse
        >>> from dpcurator.noise import InsecureSeededSource
        >>> BinaryRandomizedResponse.die().privatize([True, False], source=InsecureSeededSource(2))
        array([0, 0])
        """
        if self.variant == "exponential":
            return super().privatize(values, source=source)
        flat = check_values(values, 2)
        src = resolve_source(source)
        mechanism = coin_randomized_response if self.variant == "coin" else die_randomized_response
        return np.asarray(mechanism(flat, source=src).value, dtype=np.int64)

    def estimate_sum(self, reports: object) -> float:
        """Compute the lecture's estimate ``A = sum_i (a Y_i - b)`` of the number of ones.

        Examples
        --------
        >>> from dpcurator.local._binary import BinaryRandomizedResponse
        >>> BinaryRandomizedResponse.coin().estimate_sum([1, 1, 0, 1])  # a = 2, b = 1/2
        4.0
        """
        flat = check_values(reports, 2, "reports")
        ones = float(np.count_nonzero(flat))
        return self.a * ones - self.b * flat.size

    def rmse(self, n: int) -> float:
        """Root mean squared error of ``A``: ``sqrt(n p (1-p)) / (2p - 1)``.

        With ``p = e^eps/(e^eps + 1)`` this is the lecture's ``e^{eps/2} sqrt(n) / (e^eps - 1)``.

        Examples
        --------
        >>> from dpcurator.local._binary import BinaryRandomizedResponse
        >>> BinaryRandomizedResponse.coin().rmse(16)  # sqrt(16 * 3/16) / (1/2)
        3.4641016151377544
        """
        size = check_n(n)
        return math.sqrt(size * float(self.p * (1 - self.p))) / float(2 * self.p - 1)

    def __repr__(self) -> str:
        if self.variant != "exponential":
            return f"BinaryRandomizedResponse.{self.variant}()"
        return f"BinaryRandomizedResponse(epsilon={self.epsilon:g})"
