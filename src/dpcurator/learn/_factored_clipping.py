r"""Clipped grid sums of per-example gradients given as outer products (linear layers).

For a linear layer ``z = W a + b`` applied to one example, the gradient of that example's loss
is the outer product ``grad_W = g a^T`` (``g = dloss / dz``, the *output gradient*) and
``grad_b = g``. Over a stack of such layers, example ``i``'s gradient row is the concatenation
of ``vec(g_il a_il^T)`` and ``g_il`` over the layers ``l``, and its squared L2 norm factorises
(Goodfellow 2015):

.. math:: \|\nabla_i\|^2 = \sum_l \|g_{il}\|^2 \left(\|a_{il}\|^2 + [\text{bias}_l]\right).

:func:`clipped_outer_grid_sum` computes exactly what
:func:`~dpcurator.learn._torch_noise.clipped_grid_sum` computes for the materialised rows
(clip each row to L2 norm ``C``, round it to the grid ``2**-k Z``, sum the integer rows
exactly), but from the factors: the norms cost ``O(n (in + out))`` instead of a pass over the
``n x out x in`` rows, and the clipping scale is folded into ``g`` before the outer product is
formed, so each row is written once, rounded in place and summed.

Sensitivity (add/remove one example)
    The bound is :func:`~dpcurator.learn._torch_noise.grid_sensitivity`, the same as for the
    materialised path: the float errors below stay inside its relative slack ``2**-16``.

    * Norms are computed in float64 from the float32 (or float64) factors: squares of float32
      values are exact in float64, and sums of ``m`` non-negative terms carry a relative error of
      at most ``(m - 1) 2**-53``; the products and the sum over layers add a few ``2**-53``. So the
      computed norm ``N_i`` satisfies ``N_i >= ||grad_i|| (1 - eta)`` with
      ``eta = (d + 64) 2**-52``.
    * The scale ``s_i = C 2**k / N_i`` (or ``2**k`` when ``N_i <= C``) is applied to ``g_i`` in
      float64 and rounded to the work precision (relative ``2**-24`` in float32); each outer
      product entry adds one more rounding. A materialised row therefore has norm at most
      ``C 2**k (1 + eta) (1 + 2**-24)**2 / (1 - eta)``, plus, from float32 underflow (absolute
      ``2**-150`` per rounding, multiplied by an activation below ``2**128``), at most
      ``sqrt(d) 2**-21 <= C 2**k 2**-31`` (the grid has ``C 2**k >= 2**10 sqrt(d)``): in all
      below ``C 2**k (1 + 2**-16 + 4 eta)``.
    * Rounding each coordinate to the nearest integer adds at most ``sqrt(d) / 2``.
    * A row whose norm is not finite (a NaN or infinite factor) is replaced by zero, as in the
      materialised path.

Exact sums
    Rows are integer-valued. In float32 (``C 2**k <= 2**22``, so ``|v| < 2**23``) they are
    converted to int32 and summed in blocks of :data:`_INT32_BLOCK` rows (a block sum stays
    below ``2**31``), blocks accumulated in int64; in float64 they are summed directly (exact
    while every partial sum stays below ``2**53``, checked up front). Either way the result does
    not depend on the summation order, so removing one example changes the sum by exactly its
    own rounded row.

References
----------
I. Goodfellow, "Efficient Per-Example Gradient Computations", arXiv 1510.01799, 2015.
N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002, Section 4.2
(error of recursive summation).

Examples
--------
>>> import torch
>>> a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # two examples' inputs
>>> g = torch.tensor([[3.0], [0.1]])  # their output gradients (one output)
>>> layer = OuterFactors(a, g, bias=False)  # rows (3, 0) and (0, 0.2)
>>> total = clipped_outer_grid_sum([layer], clip_norm=1.0, bits=4)  # (1, 0) + (0, 0.2) on 2**-4
>>> (total * 2.0**-4).tolist()
[1.0, 0.1875]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from dpcurator._validation import check_integer, check_positive
from dpcurator.errors import InvalidParameterError

__all__ = ["OuterFactors", "clipped_outer_grid_sum", "exact_row_sum"]

_FLOAT32_UNIT = 2.0**22
"""Largest ``C 2**k`` whose rows are formed and rounded in float32 (as in ``_torch_noise``)."""
_NARROW = (torch.float32, torch.float16, torch.bfloat16)
_INT32_BLOCK = 256
"""Rows summed per int32 block: ``256 (2**22 + 2**7) < 2**31``."""
_ROW_CHUNK_ELEMENTS = 2**22
"""Outer products are formed for this many elements at a time (16 MiB in float32)."""
_EXACT_SUM = 2.0**52
"""Integer sums in float64 are exact while every partial sum stays below ``2**53``."""


class OuterFactors(NamedTuple):
    """One linear layer's per-example gradients, as factors.

    Attributes
    ----------
    inputs : torch.Tensor
        ``a``, shape ``(n, in)``: the layer's input for each example.
    output_grads : torch.Tensor
        ``g``, shape ``(n, out)``: the loss gradient with respect to the layer's output.
    bias : bool
        Whether the layer has a (trainable) bias, whose per-example gradient is ``g``.
    """

    inputs: torch.Tensor
    output_grads: torch.Tensor
    bias: bool


def clipped_outer_grid_sum(
    layers: Sequence[OuterFactors], *, clip_norm: float, bits: int
) -> torch.Tensor:
    """Clip each example's gradient to L2 norm ``C``, round it to the grid, sum exactly.

    Parameters
    ----------
    layers : sequence of OuterFactors
        The linear layers in parameter order, with the same number ``n`` of examples.
    clip_norm : float
        ``C`` > 0.
    bits : int
        The grid exponent ``k`` (from :func:`~dpcurator.learn._torch_noise.grid_bits`).

    Returns
    -------
    torch.Tensor
        Shape ``(d,)``, float64, integer-valued: ``sum_i round(2**k clip(grad_i))`` in grid
        units, laid out as the layers' ``weight`` (``out x in``, row-major) then ``bias``. Its
        add/remove-one sensitivity is :func:`~dpcurator.learn._torch_noise.grid_sensitivity`.

    Raises
    ------
    InvalidParameterError
        If the factors have inconsistent shapes, or the lot is too large for exact sums.

    Examples
    --------
    >>> import torch
    >>> layer = OuterFactors(torch.tensor([[3.0, 4.0]]), torch.tensor([[2.0]]), bias=True)
    >>> clipped_outer_grid_sum([layer], clip_norm=1.0, bits=8).tolist()  # (6, 8, 2) / sqrt(104)
    [151.0, 201.0, 50.0]
    """
    c = check_positive(clip_norm, "clip_norm")
    k = check_integer(bits, "bits")
    n = _check_factors(layers)
    unit = math.ldexp(c, k)
    if n * (unit * (1.0 + 2.0**-10) + 1.0) >= _EXACT_SUM:
        raise InvalidParameterError(
            "layers", f"<{n} rows>", f"are too many for exact integer sums on the grid 2**-{k}"
        )
    narrow = all(f.inputs.dtype in _NARROW and f.output_grads.dtype in _NARROW for f in layers)
    work = torch.float32 if narrow and unit <= _FLOAT32_UNIT else torch.float64
    grads64 = [f.output_grads.detach().to(torch.float64) for f in layers]
    squares = torch.zeros(n, dtype=torch.float64)
    for f, grads in zip(layers, grads64, strict=True):
        grads_sq = grads.square().sum(dim=1)
        inputs_sq = f.inputs.detach().to(torch.float64).square().sum(dim=1)
        squares += grads_sq * (inputs_sq + 1.0) if f.bias else grads_sq * inputs_sq
    norms = squares.sqrt()
    finite = torch.isfinite(norms)
    scale = torch.where(
        norms > c, unit / norms.clamp_min(torch.finfo(torch.float64).tiny), math.ldexp(1.0, k)
    )
    all_finite = bool(finite.all())
    if not all_finite:
        scale = torch.where(finite, scale, torch.zeros((), dtype=torch.float64))
    sums: list[torch.Tensor] = []
    for f, grads in zip(layers, grads64, strict=True):
        inputs, kept = f.inputs.detach(), grads
        if not all_finite:
            inputs = torch.where(finite[:, None], inputs, torch.zeros((), dtype=inputs.dtype))
            kept = torch.where(finite[:, None], grads, torch.zeros((), dtype=torch.float64))
        scaled = (kept * scale[:, None]).to(work)
        sums.append(_outer_row_sum(scaled, inputs.to(work)))
        if f.bias:
            sums.append(exact_row_sum(scaled.round_()))
    return torch.cat(sums)


def _check_factors(layers: Sequence[OuterFactors]) -> int:
    """Return the number of examples ``n`` after checking the factors' shapes."""
    if not layers or not all(isinstance(f, OuterFactors) for f in layers):
        raise InvalidParameterError("layers", "<factors>", "must be a non-empty OuterFactors list")
    n = int(layers[0].inputs.shape[0])
    for f in layers:
        if f.inputs.ndim != 2 or f.output_grads.ndim != 2:
            raise InvalidParameterError(
                "layers", tuple(f.inputs.shape), "must hold (n, in) inputs and (n, out) gradients"
            )
        if int(f.inputs.shape[0]) != n or int(f.output_grads.shape[0]) != n:
            raise InvalidParameterError("layers", "<factors>", "must all have the same n rows")
    return n


def _outer_row_sum(scaled_grads: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """Exact sum over examples of ``round(scaled_grads_i inputs_i^T)``, flattened (float64)."""
    n, outputs = scaled_grads.shape
    width = int(inputs.shape[1])
    chunk = max(1, _ROW_CHUNK_ELEMENTS // max(1, outputs * width))
    total: torch.Tensor | None = None
    for start in range(0, n, chunk):
        rows = torch.mul(
            scaled_grads[start : start + chunk, :, None], inputs[start : start + chunk, None, :]
        )
        part = exact_row_sum(rows.round_().reshape(rows.shape[0], -1))
        total = part if total is None else total.add_(part)
    if total is None:
        return torch.zeros(outputs * width, dtype=torch.float64)
    return total


def exact_row_sum(rows: torch.Tensor) -> torch.Tensor:
    """Sum integer-valued rows exactly, whatever the order; float64 result.

    Parameters
    ----------
    rows : torch.Tensor
        Shape ``(n, m)``, integer-valued; float32 rows must stay below ``2**23`` in magnitude,
        and ``n`` times the largest magnitude below ``2**53``.

    Returns
    -------
    torch.Tensor
        Shape ``(m,)``, float64: the exact column sums.

    Examples
    --------
    >>> import torch
    >>> rows = torch.tensor([[2.0**22, 1.0]] * 1000)  # 1000 * 2**22 > 2**24: inexact in float32
    >>> exact_row_sum(rows).tolist()
    [4194304000.0, 1000.0]
    """
    if rows.dtype == torch.float64:
        return rows.sum(dim=0)
    integers = rows.to(torch.int32)
    total = torch.zeros(int(rows.shape[1]), dtype=torch.int64)
    for start in range(0, int(rows.shape[0]), _INT32_BLOCK):
        total += integers[start : start + _INT32_BLOCK].sum(dim=0, dtype=torch.int32)
    return total.to(torch.float64)
