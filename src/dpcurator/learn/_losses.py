r"""The convex losses of DP empirical risk minimisation, with the constants their privacy needs.

Two families, both convex and smooth in the parameters :math:`\theta` and both with a bounded
per-example gradient, so that one code path (:mod:`dpcurator.learn._solver`, output,
objective and gradient perturbation) serves them all:

- :class:`GLMLoss`, a generalised linear loss :math:`\psi(\langle\theta, x\rangle, t)` of one
  parameter vector (logistic, smoothed hinge, Huberised squared loss). ``K`` target columns
  are ``K`` separate problems (one-vs-rest).
- :class:`MultinomialLoss`, the softmax cross-entropy of a ``K x d`` parameter matrix: one
  problem for all ``K`` classes, so one privacy budget instead of ``K``.

For rows :math:`\|x\|_2 \le R` each loss states

- ``slope_bound`` ``G``: :math:`\|\nabla_\theta\ell(\theta; x, t)\|_2 \le G R` (the loss is
  :math:`\zeta = GR`-Lipschitz, the constant of the sensitivity lemma);
- :meth:`~GLMLoss.jacobian_cost`: the log-determinant bound of the change of variables in
  objective perturbation (Chaudhuri, Monteleoni and Sarwate 2011, Theorem 9);
- ``cross_weight`` and ``example_inner_products``: how one example's gradient meets a noise
  vector (the Gaussian objective perturbation bound; neighbours differ in one or two
  examples' gradients);
- :meth:`~GLMLoss.smoothness`: a bound on the Hessian of the mean loss (the step of gradient
  descent).

Examples
--------
>>> import numpy as np
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
>>> value, grad, hess = multinomial_loss(3).risk(X, np.eye(3)[[0, 2]], np.zeros(6))
>>> round(value, 4), grad.shape, hess.shape  # ln 3 at theta = 0
(1.0986, (6,), (6, 6))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, log_softmax, softmax

from dpcurator._validation import check_integer, check_positive

__all__ = [
    "ERMLoss",
    "GLMLoss",
    "MultinomialLoss",
    "huber_hinge_loss",
    "logistic_loss",
    "multinomial_loss",
    "squared_loss",
]

Risk = tuple[float, NDArray[np.float64], NDArray[np.float64]]
"""``(mean loss, its gradient, its Hessian)`` at a flat parameter vector."""

HessianProduct = Callable[[NDArray[np.float64]], NDArray[np.float64]]
"""``v -> H v`` for the Hessian ``H`` of the mean loss at a fixed parameter vector."""


@dataclass(frozen=True, slots=True)
class GLMLoss:
    r"""A generalised linear loss :math:`\psi(s, t)`, ``s`` the margin or prediction.

    Attributes
    ----------
    name : str
        ``"logistic"``, ``"huber_hinge"`` or ``"squared"``.
    slope_bound : float
        ``G``, a bound on :math:`|\partial_s \psi|`.
    curvature : float
        ``c``, a bound on :math:`\partial_s^2 \psi` (which is >= 0: the loss is convex).
    width : float
        The Huber width ``h`` (``huber_hinge``) or the residual threshold (``squared``).

    Examples
    --------
    >>> import numpy as np
    >>> value, slope, curvature = logistic_loss().evaluate(np.array([0.0]), np.array([1.0]))
    >>> float(slope[0]), float(curvature[0])
    (-0.5, 0.25)
    """

    name: str
    slope_bound: float
    curvature: float
    width: float = 0.0

    joint = False
    """Target columns are separate problems (one-vs-rest)."""

    example_inner_products = 1
    r"""One example's gradient is :math:`c\,x`: one inner product :math:`\langle b, x\rangle`."""

    @property
    def cross_weight(self) -> float:
        r"""``G``: :math:`|\langle b, \nabla\ell\rangle| \le G\,|\langle b, x\rangle|`."""
        return self.slope_bound

    def parameter_count(self, n_features: int) -> int:
        """Length of one problem's parameter vector: ``n_features``."""
        return n_features

    def problems(self, targets: NDArray[np.float64]) -> list[NDArray[np.float64]]:
        """One target vector per column of ``targets`` (shape ``(n, K)``)."""
        return [targets[:, k] for k in range(targets.shape[1])]

    def jacobian_cost(self, radius: float, n: float, mu: float) -> float:
        r""":math:`\ln(1 + cR^2/(n\mu))`: one example's Hessian has rank one, eigenvalue <= cR^2.

        Examples
        --------
        >>> round(logistic_loss().jacobian_cost(1.0, 100, 0.01), 6)  # ln(1 + 0.25)
        0.223144
        """
        return math.log1p(self.curvature * radius * radius / (n * mu))

    def regulariser_for(self, radius: float, n: float, budget: float) -> float:
        """Return the smallest ``mu`` whose :meth:`jacobian_cost` is at most ``budget``.

        Examples
        --------
        >>> loss = logistic_loss()
        >>> mu = loss.regulariser_for(1.0, 100, 0.1)
        >>> round(loss.jacobian_cost(1.0, 100, mu), 12)
        0.1
        """
        return self.curvature * radius * radius / (n * math.expm1(min(budget, 700.0)))

    def smoothness(self, radius: float) -> float:
        """``c R^2``, a bound on the Hessian of the mean loss.

        Examples
        --------
        >>> logistic_loss().smoothness(2.0)
        1.0
        """
        return self.curvature * radius * radius

    def evaluate(
        self, s: NDArray[np.float64], t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Return the loss, its first and its second derivative in ``s``, elementwise."""
        if self.name == "logistic":
            z = t * s
            value = np.logaddexp(0.0, -z)
            d1 = -t * expit(-z)
            d2 = expit(z) * expit(-z)
            return value, d1, d2
        if self.name == "huber_hinge":
            h = self.width
            z = t * s
            gap = 1.0 + h - z
            middle = np.abs(1.0 - z) <= h
            low = z < 1.0 - h
            value = np.where(low, 1.0 - z, np.where(middle, gap * gap / (4.0 * h), 0.0))
            dz = np.where(low, -1.0, np.where(middle, -gap / (2.0 * h), 0.0))
            return value, t * dz, np.where(middle, 1.0 / (2.0 * h), 0.0)
        # Squared loss, Huberised beyond the residual threshold (slope bounded by it).
        a = self.width
        r = s - t
        inside = np.abs(r) <= a
        value = np.where(inside, 0.5 * r * r, a * np.abs(r) - 0.5 * a * a)
        return value, np.clip(r, -a, a), inside.astype(np.float64)

    def risk(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> Risk:
        """Mean loss over the rows of ``X``, its gradient and Hessian at ``theta``."""
        value, grad = self.value_and_gradient(X, t, theta)
        return value, grad, self.hessian(X, t, theta)

    def value_and_gradient(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64]]:
        """Mean loss and its gradient at ``theta`` (the line search needs no Hessian)."""
        value, d1, _ = self.evaluate(X @ theta, t)
        out: NDArray[np.float64] = X.T @ d1 / X.shape[0]
        return float(value.mean()), out

    def hessian(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Hessian of the mean loss at ``theta``."""
        _, _, d2 = self.evaluate(X @ theta, t)
        out: NDArray[np.float64] = (X.T * d2) @ X / X.shape[0]
        return out

    def hessian_product(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> HessianProduct:
        """``v -> H v`` for the Hessian ``H`` of the mean loss at ``theta``, never formed.

        Examples
        --------
        >>> import numpy as np
        >>> X, t, theta = np.array([[1.0, 2.0]]), np.array([1.0]), np.zeros(2)
        >>> logistic_loss().hessian_product(X, t, theta)(np.array([1.0, 0.0])).tolist()
        [0.25, 0.5]
        """
        _, _, d2 = self.evaluate(X @ theta, t)
        weights = d2 / X.shape[0]

        def product(v: NDArray[np.float64]) -> NDArray[np.float64]:
            out: NDArray[np.float64] = X.T @ (weights * (X @ v))
            return out

        return product

    def example_gradients(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Per-example gradients, shape ``(n, d)``; row ``i`` has norm <= ``G ||x_i||``."""
        _, d1, _ = self.evaluate(X @ theta, t)
        out: NDArray[np.float64] = d1[:, None] * X
        return out


@dataclass(frozen=True, slots=True)
class MultinomialLoss:
    r"""Softmax cross-entropy of ``K`` classes, one problem for a ``K x d`` parameter matrix.

    :math:`\ell(\Theta; x, y) = \ln\sum_k e^{\langle\theta_k, x\rangle} -
    \langle\theta_y, x\rangle`, :math:`\Theta \in R^{K\times d}`, ``y`` one-hot.

    The constants, for rows :math:`\|x\|_2 \le R` (:math:`p` the softmax probabilities):

    - gradient :math:`(p - e_y)x^\top`, of Frobenius norm :math:`\|p - e_y\|_2\|x\|_2 \le
      \sqrt2 R` since :math:`\|p - e_y\|_2^2 = (1 - p_y)^2 + \sum_{k \ne y}p_k^2 \le
      2(1 - p_y)^2`: ``slope_bound = sqrt(2)``;
    - Hessian :math:`(\mathrm{diag}(p) - pp^\top)\otimes xx^\top`, positive semi-definite (the
      loss is convex) of rank at most ``K - 1`` (the all-ones vector is in the kernel of the
      first factor) with eigenvalues summing to :math:`(1 - \|p\|^2)\|x\|^2 \le (1 - 1/K)R^2`;
      its largest eigenvalue is at most :math:`R^2/2`, the smoothness;
    - objective perturbation (CMS11, Theorem 9, for this loss): with :math:`A \succeq n\mu I`
      the Jacobian of the other examples and the regulariser, the determinant ratio of
      neighbours is at most :math:`\det(I + A^{-1/2}H_1A^{-1/2}) \le \prod_j(1 +
      \lambda_j(H_1)/(n\mu))`, and by concavity of the logarithm over ``K - 1`` eigenvalues of
      sum :math:`\le (1 - 1/K)R^2`, its logarithm is at most :math:`(K - 1)\ln(1 +
      R^2/(Kn\mu))` (:meth:`jacobian_cost`; ``K = 2`` gives the binary :math:`\ln(1 +
      R^2/(2n\mu))` of this parametrisation);
    - one example's gradient :math:`(p - e_y)x^\top` meets a noise matrix ``B`` as
      :math:`|\langle B, (p - e_y)x^\top\rangle| \le \|p - e_y\|_1\max_k|\langle b_k,
      x\rangle|` with :math:`\|p - e_y\|_1 = 2(1 - p_y) \le 2`: ``cross_weight = 2`` over
      ``example_inner_products = K`` inner products (a replaced row changes two gradients, an
      added or removed row one).

    Attributes
    ----------
    classes : int
        ``K`` >= 2.

    Examples
    --------
    >>> multinomial_loss(10).jacobian_cost(1.0, 1000, 0.01) < 0.1
    True
    """

    classes: int

    joint = True
    """The ``K`` target columns (one-hot labels) form one problem."""

    slope_bound = math.sqrt(2.0)

    cross_weight = 2.0

    @property
    def example_inner_products(self) -> int:
        """``K``: one per class row of the noise."""
        return self.classes

    def parameter_count(self, n_features: int) -> int:
        """Length of the flattened parameter matrix: ``K * n_features``."""
        return self.classes * n_features

    def problems(self, targets: NDArray[np.float64]) -> list[NDArray[np.float64]]:
        """Return the one-hot targets (shape ``(n, K)``) as one problem."""
        return [targets]

    def jacobian_cost(self, radius: float, n: float, mu: float) -> float:
        r""":math:`(K - 1)\ln(1 + R^2/(Kn\mu))` (see the class notes).

        Examples
        --------
        >>> round(multinomial_loss(2).jacobian_cost(1.0, 100, 0.01), 6)  # ln(1 + 1/2)
        0.405465
        """
        k = self.classes
        return (k - 1) * math.log1p(radius * radius / (k * n * mu))

    def regulariser_for(self, radius: float, n: float, budget: float) -> float:
        """Return the smallest ``mu`` whose :meth:`jacobian_cost` is at most ``budget``.

        Examples
        --------
        >>> loss = multinomial_loss(10)
        >>> round(loss.jacobian_cost(1.0, 500, loss.regulariser_for(1.0, 500, 0.2)), 12)
        0.2
        """
        k = self.classes
        return radius * radius / (k * n * math.expm1(min(budget / (k - 1), 700.0)))

    def smoothness(self, radius: float) -> float:
        """``R^2 / 2``, a bound on the Hessian of the mean loss.

        Examples
        --------
        >>> multinomial_loss(3).smoothness(2.0)
        2.0
        """
        return radius * radius / 2.0

    def _probabilities(
        self, X: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        scores = X @ theta.reshape(self.classes, X.shape[1]).T
        log_p: NDArray[np.float64] = log_softmax(scores, axis=1)
        p: NDArray[np.float64] = softmax(scores, axis=1)
        return log_p, p

    def risk(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> Risk:
        """Mean loss, gradient and Hessian at the flat ``theta`` (``t`` one-hot, ``(n, K)``)."""
        value, grad = self.value_and_gradient(X, t, theta)
        return value, grad, self.hessian(X, t, theta)

    def value_and_gradient(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64]]:
        """Mean loss and its gradient at the flat ``theta`` (``t`` one-hot, ``(n, K)``)."""
        n = X.shape[0]
        log_p, p = self._probabilities(X, theta)
        grad: NDArray[np.float64] = ((p - t).T @ X / n).reshape(-1)
        return -float(np.sum(log_p * t)) / n, grad

    def hessian(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Hessian of the mean loss at the flat ``theta``, ``(K d, K d)``."""
        n, d = X.shape
        _, p = self._probabilities(X, theta)
        weighted = (p[:, :, None] * X[:, None, :]).reshape(n, self.classes * d)
        hess: NDArray[np.float64] = -(weighted.T @ weighted) / n
        for c in range(self.classes):
            block = slice(c * d, (c + 1) * d)
            hess[block, block] += (X.T * p[:, c]) @ X / n
        return hess

    def hessian_product(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> HessianProduct:
        r"""``v -> H v`` at the flat ``theta``, never forming the ``(K d)^2`` Hessian.

        With ``A = X V^T`` (``V`` the ``K x d`` reshaped ``v``), row ``i`` of
        :math:`(\mathrm{diag}(p_i) - p_ip_i^\top)A_i` is :math:`p_i \odot A_i - p_i\langle p_i,
        A_i\rangle`, and :math:`Hv` is the mean of its outer products with :math:`x_i`:
        ``O(n K d)`` per product against ``O(n K^2 d^2)`` for the Hessian.

        Examples
        --------
        >>> import numpy as np
        >>> loss, X = multinomial_loss(3), np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> t, theta, v = np.eye(3)[[0, 2]], np.zeros(6), np.arange(6.0)
        >>> bool(np.allclose(loss.hessian_product(X, t, theta)(v), loss.hessian(X, t, theta) @ v))
        True
        """
        n, d = X.shape
        _, p = self._probabilities(X, theta)

        def product(v: NDArray[np.float64]) -> NDArray[np.float64]:
            a = X @ v.reshape(self.classes, d).T
            b = p * a - p * np.sum(p * a, axis=1, keepdims=True)
            out: NDArray[np.float64] = (b.T @ X / n).reshape(-1)
            return out

        return product

    def example_gradients(
        self, X: NDArray[np.float64], t: NDArray[np.float64], theta: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Per-example gradients, shape ``(n, K d)``; row ``i`` has norm <= ``sqrt(2) ||x_i||``."""
        _, p = self._probabilities(X, theta)
        out: NDArray[np.float64] = ((p - t)[:, :, None] * X[:, None, :]).reshape(X.shape[0], -1)
        return out


ERMLoss = GLMLoss | MultinomialLoss
"""A loss the ERM mechanisms accept."""


def logistic_loss() -> GLMLoss:
    r"""Logistic loss :math:`\psi(s, t) = \ln(1 + e^{-ts})`, ``t`` in {-1, 1}.

    Slope bound ``G = 1``, curvature ``c = 1/4``.

    Examples
    --------
    >>> logistic_loss().curvature
    0.25
    """
    return GLMLoss("logistic", 1.0, 0.25)


def huber_hinge_loss(width: float = 0.5) -> GLMLoss:
    r"""Smoothed (Huber) hinge of Chaudhuri, Monteleoni and Sarwate (2011), Section 3.4.1.

    With :math:`z = ts`: 0 for :math:`z > 1 + h`, :math:`(1 + h - z)^2 / (4h)` for
    :math:`|1 - z| \le h`, :math:`1 - z` below; ``G = 1``, ``c = 1/(2h)``.

    Examples
    --------
    >>> huber_hinge_loss(0.5).curvature
    1.0
    """
    h = check_positive(width, "huber_width")
    return GLMLoss("huber_hinge", 1.0, 1.0 / (2.0 * h), h)


def squared_loss(residual_bound: float) -> GLMLoss:
    r"""Squared loss :math:`(s - t)^2/2`, linear beyond :math:`|s - t| > a`: ``G = a``, ``c = 1``.

    With labels in :math:`[-B, B]`, rows of norm at most ``R`` and ridge penalty ``mu``, the
    unconstrained minimiser has :math:`\|\theta^*\| \le B/\sqrt{\mu}` (compare :math:`J` at
    :math:`\theta^*` and at 0), so every residual there is at most :math:`a = RB/\sqrt\mu + B`:
    with that ``a`` the minimiser is exactly the ridge solution, and the slope stays bounded.

    Examples
    --------
    >>> squared_loss(3.0).slope_bound
    3.0
    """
    a = check_positive(residual_bound, "residual_bound")
    return GLMLoss("squared", a, 1.0, a)


def multinomial_loss(classes: int) -> MultinomialLoss:
    """Softmax cross-entropy over ``classes`` classes (:class:`MultinomialLoss`).

    Examples
    --------
    >>> multinomial_loss(10).slope_bound == 2 ** 0.5
    True
    """
    return MultinomialLoss(check_integer(classes, "classes", minimum=2))
