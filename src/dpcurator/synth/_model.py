r"""Graphical-model inference from noisy marginals (Private-PGM, in numpy).

Given noisy marginals ``y_C = M_C(D) + Z_C`` with Gaussian noise of standard deviation
``sigma_C``, find the distribution ``p`` of a Markov random field over the measured cliques that
minimises

.. math:: L(\\mu) = \\sum_C \\frac{1}{2 \\sigma_C^2} \\lVert N \\mu_C - y_C \\rVert_2^2,

where ``mu_C`` are the model's clique marginals and ``N`` the estimated number of rows: entropic
mirror descent on the marginal polytope, whose iterates are ``theta <- theta - eta dL/dmu`` on
the natural parameters, with the marginals recomputed by belief propagation on a junction tree
and the step chosen by Armijo backtracking (McKenna, Sheldon and Miklau 2019, "Graphical-model
based estimation and inference for differential privacy", ICML, Algorithm 1). Everything here
reads the noisy marginals only: it is post-processing and costs no privacy.

Where the time goes, and what keeps it short: each step evaluates the loss a few times, each
evaluation is one belief propagation and one projection of the clique marginals onto the
measured cliques. Sums of a large table down to a few of its axes go block by block of adjacent
summed axes (over the middle axis of a 3-d view: one pass in contiguous rows, by ``einsum``, or
as a product with ones where the rows are short), and
sums of small tables and most broadcasts back through a precomputed index (``bincount`` and a
gather: numpy's reductions over interleaved axes are several times slower); the
measurements of one clique are projected through a tree of intermediate tables (several
measured cliques lacking one attribute are summed from one table with it summed out); belief
propagation divides a clique's marginal by a child's message instead of recomputing the other
children's product. The gradient is kept as the terms whose broadcasts sum to it, and each trial
step adds them to the potentials in one pass, a few cache-sized rows at a time; normalisation
exponentiates and sums each piece of a table while it is in cache, and on a model of one clique
(AIM's at Adult epsilon 3 and 10: the whole domain) the momentum's extrapolation is
exponentiated in the pass that builds it; accelerated steps compute the marginals and
potentials of large cliques in float32 (half the memory traffic; messages, gradients and losses
stay float64), plain steps in float64; on models with a large clique the step size grows more
slowly between steps (``_GROW_LARGE``: fewer rejected trials, each costly there). Passes over
tables of at least ``LEAST`` cells (:mod:`dpcurator.synth._threads`) are shared among threads,
with the same results to the bit whatever their number.
A fit may start from an earlier model's potentials (``warm_start``, as AIM's final fit does
under a time limit) and stop once the loss has stopped falling (``tolerance``).

Where a fit stops matters: the loss keeps falling as the model fits the noise, and the error
against the true marginals rises again past some point, so the error is set by the path and the
stop. ``discrepancy`` runs accelerated steps (FISTA with restarts) down to the loss's expected
value at the true marginals (Morozov's discrepancy principle: half the measured cells), which
every path reaches with the error still falling, and lets plain steps and ``tolerance`` end the
fit from there (AIM's final fit, from uniform potentials; see BENCHMARKS.md for its errors).

Synthetic rows are drawn from the fitted model along the junction tree, one attribute at a time
(those with fewer values first within a clique), each conditionally on the clique's attributes
already drawn, as in the authors' ``mbi`` library, each group's conditional counts rounded with
the remainders carried from group to group (so that a value's counts over many small groups stay
within rows of the model's too), the values laid evenly along the group's rows sorted by the
attributes drawn before (balanced sampling: every marginal of the table, not only the
cliques', stays within rows of the model's). Marginals over several cliques are summed on the
smallest subtree that holds them.

Examples
--------
>>> import numpy as np
>>> y = [(0,), (1,), (0, 1)]
>>> counts = [np.array([30.0, 70.0]), np.array([50.0, 50.0]),
...           np.array([20.0, 10.0, 30.0, 40.0])]
>>> model = fit_model((2, 2), [Marginal(c, v, 1.0) for c, v in zip(y, counts)], iterations=300)
>>> np.round(model.marginal((0, 1)), 1).tolist()
[20.0, 10.0, 30.0, 40.0]
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import RandomSource, resolve_source, uniform_integers
from dpcurator.synth._allocator import raise_thresholds
from dpcurator.synth._threads import LEAST as _LEAST
from dpcurator.synth._threads import PIECE as _PIECE
from dpcurator.synth._threads import in_pieces, in_rows, pieces

__all__ = ["JunctionTree", "Marginal", "Model", "fit_model", "junction_tree_size"]

FloatArray = NDArray[np.float64]
Clique = tuple[int, ...]
_TINY = 1e-300
_BACKTRACKS = 20
"""Halvings of the step the line search tries before it declares the descent converged."""
_WINDOW = 50
"""Steps over which ``fit_model``'s convergence test compares the loss."""
_GROW = 1.5
"""Each step first tries the last accepted step size times this (see ``_GROW_LARGE``)."""
_GROW_LARGE = 1.25
"""The growth of the step size on a model with a clique of at least ``_LEAST`` cells.

There a trial step costs milliseconds, and about 0.6 per step were rejected with ``_GROW``:
a slower growth wastes fewer (AIM at Adult epsilon 10: 0.82x the time over 8 seeds, epsilon
3: 0.87x over 12, the errors unchanged within their noise). On smaller models the trials are
cheap and ``_GROW`` is kept: there 1.25 changed where AIM's capped round fits and the final
fit's 1 % rule stop (CPS, epsilon 0.3: the 3-way error +0.0009 over 32 seeds).
"""
_SHRINK = 0.5
"""The line search multiplies a rejected step size by this."""


@dataclass(frozen=True)
class Marginal:
    """A noisy marginal: the clique (sorted attribute indices), its values, its noise's std.

    ``values`` is the flattened table of counts over the clique's attributes (C order).
    """

    clique: Clique
    values: FloatArray
    sigma: float


def _lse(values: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """``log(sum(exp(values)))`` over ``axes`` (kept as size-1 axes are dropped)."""
    if not axes:
        return values
    top = np.max(values, axis=axes, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.sum(np.exp(values - top), axis=axes, keepdims=True)) + top
    return np.asarray(np.squeeze(out, axis=axes), dtype=np.float64)


def _maximum(table: FloatArray) -> float:
    """Return the largest cell of ``table`` (worked on in threads, by pieces)."""
    flat = table.reshape(-1)
    return max(in_pieces(lambda part: float(np.max(flat[part])), flat.size))


def _exp_shifted(table: FloatArray, top: float) -> FloatArray:
    """Return ``exp(table - top)`` as a new table (in threads, by pieces)."""
    flat = table.reshape(-1)
    weights = np.empty(table.shape)
    into = weights.reshape(-1)

    def piece(part: slice) -> None:
        np.subtract(flat[part], top, out=into[part])
        np.exp(into[part], out=into[part])

    in_pieces(piece, flat.size)
    return weights


def _normalised(
    belief: FloatArray, dtype: type[np.floating] = np.float64
) -> tuple[FloatArray, float]:
    """Return ``exp(belief) / Z`` as a new ``dtype`` table, and ``log Z`` (``Z``: sum of ``exp``).

    Two passes, by pieces in threads: each piece ``P`` is exponentiated from its own maximum
    ``m_P`` and summed while in cache (:func:`_exp_part`), then scaled by ``exp(m_P - m) / Z``
    (``m`` the largest ``m_P``, ``Z`` the sum of the pieces' sums so scaled; :func:`_rescaled`):
    the same values as from ``m``. In float32 (``dtype``), ``belief - m_P`` is computed in
    float64 and rounded once.
    """
    flat = belief.reshape(-1)
    weights = np.empty(belief.shape, dtype=dtype)
    into = weights.reshape(-1)
    stats = in_pieces(lambda part: _exp_part(flat[part], into[part]), flat.size)
    return weights, _rescaled(into, pieces(flat.size), stats)


def _exp_part(cells: FloatArray, into: NDArray[np.floating]) -> tuple[float, float]:
    """Write ``exp(cells - m)`` into ``into`` (``m``: the cells' maximum); return ``m`` and the sum.

    Cells all ``-inf`` (no mass, as in a message of zeros) give zeros, ``m = -inf`` and sum 0.
    """
    top = float(np.max(cells))
    if top == -math.inf:
        into[...] = 0.0
        return top, 0.0
    np.subtract(cells, top, out=into, casting="same_kind")
    np.exp(into, out=into)
    return top, float(np.einsum("i->", into))  # 3x faster than np.sum's pairwise sum


def _rescaled(
    flat: NDArray[np.floating], parts: Sequence[slice], stats: Sequence[tuple[float, float]]
) -> float:
    """Normalise ``flat``, whose parts hold ``exp(x - m_P)`` (``stats``: each ``m_P`` and sum).

    Each part is multiplied by ``exp(m_P - m) / Z`` in place (threads by runs of parts), ``m``
    the largest ``m_P`` and ``Z`` the sum of the parts' sums so scaled; returns ``log Z + m``,
    the log of the sum of ``exp(x)``.
    """
    top = max(part_top for part_top, _ in stats)
    factors = [math.exp(part_top - top) for part_top, _ in stats]
    total = sum(f * part_sum for f, (_, part_sum) in zip(factors, stats, strict=True))
    scales = [f / total for f in factors]

    def scale(run: slice) -> None:
        for i in range(run.start, run.stop):
            np.multiply(flat[parts[i]], scales[i], out=flat[parts[i]])

    in_rows(scale, len(parts), flat.size)
    return top + math.log(total)


def _shape(attrs: Clique, target: Clique, sizes: Sequence[int]) -> tuple[int, ...]:
    """Broadcast shape of a table over ``attrs`` inside a table over ``target`` (both sorted)."""
    return tuple(sizes[a] if a in attrs else 1 for a in target)


def _project(values: FloatArray, attrs: Clique, keep: Clique) -> FloatArray:
    """Sum a (probability) table over ``attrs`` down to ``keep`` (a sorted subset).

    Tables of at least ``_BLOCK_CELLS`` cells are summed block by block (see ``_Map``): a
    3-way marginal of a 1.8-million-cell table in a few milliseconds instead of about 100.
    """
    axes = tuple(i for i, a in enumerate(attrs) if a not in keep)
    if not axes:
        return values
    if not keep or values.size < _BLOCK_CELLS:
        return np.asarray(values.sum(axis=axes), dtype=np.float64)
    kept = tuple(i for i, a in enumerate(attrs) if a in keep)
    table = values
    for before, block, after in _blocks(tuple(range(len(attrs))), kept, values.shape):
        table = _sum_middle(table.reshape(before, block, after))
    return np.asarray(table, dtype=np.float64).reshape(tuple(values.shape[i] for i in kept))


def _sum_middle(table: FloatArray) -> FloatArray:
    """Sum a ``(before, block, after)`` table over its middle axis, in threads by rows.

    Each thread sums a range of ``before`` (or, with one row, of ``after``): every output cell
    is the same sum, in the same order, whatever the threads. Where a row holds fewer than
    ``_BLAS_CELLS`` cells, as a product with a vector of ones (``matmul``, BLAS): twice as
    fast as ``einsum``'s sum on AIM's short rows, 5x on the shortest (session 23).
    """
    before, block, after = table.shape
    out = np.empty((before, after), dtype=table.dtype)
    if before > 1 and block * after < _BLAS_CELLS:
        ones = _ones(block, table.dtype)
        in_rows(lambda part: np.matmul(ones, table[part], out=out[part]), before, table.size)
    elif before > 1:
        in_rows(lambda part: np.einsum("ijk->ik", table[part], out=out[part]), before, table.size)
    else:
        in_rows(
            lambda part: np.einsum("ijk->ik", table[:, :, part], out=out[:, part]),
            after,
            table.size,
        )
    return out


_BLAS_CELLS = 8192
"""Most cells of a row that ``_sum_middle`` hands to BLAS.

OpenBLAS works on a product of at least 9,216 cells in threads of its own, which compete with
the pool's and may round differently with their number; below that it runs in the caller's.
"""


@functools.cache
def _ones(cells: int, dtype: np.dtype[np.floating]) -> FloatArray:
    """Return a read-only vector of ``cells`` ones (``_sum_middle``'s weights)."""
    ones = np.ones(cells, dtype=dtype)
    ones.flags.writeable = False
    return ones


_INDEXED_CELLS = 1 << 22
"""Largest table (cells) whose sums and broadcasts go through a precomputed index."""
_SUBTREE_CELLS = 1 << 20
"""Largest product (cells) a marginal over several cliques builds, if no clique is larger."""
_UNDERFLOW = 1e-280
"""Below this, a sum of ``exp`` scaled by the table's maximum is recomputed group by group."""


class _Map:
    """Sum a table over ``attrs`` down to ``keep`` (a sorted subset), and broadcast back.

    A table of at least ``_BLOCK_CELLS`` cells is summed one block of adjacent dropped axes
    at a time (:func:`_blocks`), each as the middle axis of a ``(before, block, after)``
    array, by ``einsum`` (one pass, in contiguous rows). It is broadcast back by a view where
    it drops one block followed by rows of at least ``_BLOCK_ROW`` cells. Other tables, and
    other broadcasts, go through a precomputed index (each cell's cell in the smaller table),
    by ``bincount`` and by gathering: numpy's reductions and broadcasts over several
    interleaved axes of a C-ordered table, or with short rows, are far slower than one pass
    over the cells, and ``bincount`` (which forces float64) is slower than ``einsum`` over a
    block but costs less on small tables. Tables larger than ``_INDEXED_CELLS`` keep no index
    (numpy's broadcasts).
    """

    def __init__(self, attrs: Clique, keep: Clique, sizes: Sequence[int]) -> None:
        self.attrs, self.keep = attrs, keep
        self.shape = tuple(sizes[a] for a in attrs)
        self.keep_shape = tuple(sizes[a] for a in keep)
        self.broadcast = _shape(keep, attrs, sizes)
        self.cells = math.prod(self.keep_shape)
        cells = math.prod(self.shape)
        self.blocks: list[tuple[int, int, int]] = []
        """``(before, block, after)`` of each block summed out in turn (none: by the index)."""
        if keep != attrs and keep and cells >= _BLOCK_CELLS:
            self.blocks = _blocks(attrs, keep, sizes)
        self.index: NDArray[np.intp] | None = None
        """Each cell of the table over ``attrs``: its cell over ``keep`` (None: numpy's)."""
        self.run = math.prod(sizes[a] for a in attrs[len(attrs) - _kept_suffix(attrs, keep) :])
        """Cells of the last axes ``keep`` holds: the contiguous runs of a broadcast view."""
        viewed = len(self.blocks) == 1 and self.blocks[0][2] >= _BLOCK_ROW
        if keep != attrs and keep and not viewed and cells <= _INDEXED_CELLS:
            self.index = _flat_index(attrs, keep, sizes)

    def project(self, table: FloatArray) -> FloatArray:
        """Return ``table`` summed down to ``keep`` (shaped over ``keep``)."""
        if self.blocks:
            for before, block, after in self.blocks:
                table = _sum_middle(table.reshape(before, block, after))
            return np.asarray(table, dtype=np.float64).reshape(self.keep_shape)
        if self.index is None:
            return _project(table, self.attrs, self.keep)
        flat = np.bincount(self.index, weights=table.reshape(-1), minlength=self.cells)
        return np.asarray(flat, dtype=np.float64).reshape(self.keep_shape)

    def view(self, values: FloatArray) -> FloatArray:
        """Return ``values`` (over ``keep``) as a read-only broadcast view over ``attrs``."""
        return np.broadcast_to(values.reshape(self.broadcast), self.shape)

    def expand(self, values: FloatArray) -> FloatArray:
        """Return ``values`` (over ``keep``) broadcast to a table over ``attrs``."""
        if self.index is None:
            return self.view(values)
        return values.reshape(-1)[self.index].reshape(self.shape)

    def added(
        self, values: FloatArray, base: FloatArray | None = None, out: FloatArray | None = None
    ) -> FloatArray:
        """Return ``base + expand(values)`` (``expand(values)`` without ``base``) in ``out``.

        ``out`` (a new table if not given) may be ``base``: an addition in place. Worked on in
        threads, by flat pieces through the index (gathered a piece at a time), else by rows.
        """
        target = np.empty(self.shape) if out is None else out
        if self.index is not None:
            flat, index = values.reshape(-1), self.index
            assert target.flags.c_contiguous, "an addition in place needs a contiguous table"
            into = target.reshape(-1)
            start = None if base is None else base.reshape(-1)

            def piece(part: slice) -> None:
                if start is None:
                    np.take(flat, index[part], out=into[part], mode="clip")
                else:
                    np.add(start[part], flat[index[part]], out=into[part])

            in_pieces(piece, into.size)
            return target
        view = self.expand(values)

        def rows(part: slice) -> None:
            if base is None:
                target[part] = view[part]
            else:
                np.add(base[part], view[part], out=target[part])

        in_rows(rows, self.shape[0], target.size)
        return target

    def log_sum_exp(self, table: FloatArray) -> FloatArray:
        """Return ``log(sum(exp(table)))`` down to ``keep``, exactly where sums underflow."""
        top = _maximum(table)
        if not math.isfinite(top):
            return _lse(table, tuple(i for i, a in enumerate(self.attrs) if a not in self.keep))
        sums = self.project(_exp_shifted(table, top))
        if float(np.min(sums)) < _UNDERFLOW:  # a group far below the maximum: max per group
            return _lse(table, tuple(i for i, a in enumerate(self.attrs) if a not in self.keep))
        return np.asarray(np.log(sums) + top, dtype=np.float64)


_COMPACT = np.float32
"""The precision of the large cliques' marginals in a fit's accelerated steps.

Half the memory traffic of float64, and ``exp`` about twice as fast: at Adult epsilon 10, whose
model is one clique of 1,814,400 cells, AIM's fits between rounds take 7-12 % less time. A cell's
relative error is about ``6e-8 (1 + |theta - max theta|)`` (the exponent rounded to float32),
2e-6 at 30 below the largest, far below the noise of any measured marginal; the messages,
gradients and losses stay float64 and the fitted model's marginals are float64 (the large
potentials are float32 too: ``_COMPACT_POTENTIALS``). A plain phase after the accelerated
one is float64 (its potentials and marginals recomputed at the hand-over): that phase's stop
compares losses 1 % apart, and in float32 it moved (AIM's final fit at Adult epsilon 3: 671
steps instead of 547 on one input). Its accelerated phase in float32 (session 22) gave the
same steps and loss, to the second decimal, on AIM's final fit at Adult epsilon 10.
AIM's releases change only where a round's choice flips on the rounding (Adult epsilon 10:
one of two seeds).
"""


_COMPACT_POTENTIALS = True
"""Whether the large cliques' potentials are ``_COMPACT`` too in a fit's accelerated steps.

Each trial step writes the stepped potentials and reads them back to exponentiate them: in
float32 that traffic halves, and AIM's fits between rounds at Adult epsilon 10 take 0.82x the
time, with the same steps and losses to four digits (session 22). A potential's rounding is
about ``6e-8 |theta|`` per step, below ``_COMPACT``'s own on the marginals' exponents after a
hundred steps; the fitted model's marginals are recomputed in float64 from them.
"""


def _marginal_dtype(cells: int, compact: bool) -> type[np.floating]:
    """Return the precision of a marginal of ``cells`` cells (``compact``: see ``_COMPACT``)."""
    return _COMPACT if compact and cells >= _LEAST else np.float64


_BLOCK_CELLS = 4096
"""Least cells of a table that ``_Map`` sums block by block (smaller ones: by ``bincount``)."""


_BLOCK_ROW = 32
"""Least cells after a single dropped block for ``_Map`` to broadcast back by a view."""


def _blocks(attrs: Clique, keep: Clique, sizes: Sequence[int]) -> list[tuple[int, int, int]]:
    """Return the blocks of adjacent axes of ``attrs`` absent from ``keep``, left to right.

    They are summed out in that order, each as ``(before, block, after)`` cells of the table
    the blocks before it left: that table, shaped so, is summed over its middle axis.

    >>> _blocks((0, 1, 2, 3, 4), (1, 3), (2, 3, 4, 40, 5))
    [(1, 2, 2400), (3, 4, 200), (120, 5, 1)]
    """
    steps: list[tuple[int, int, int]] = []
    rest = list(attrs)
    position = 0
    while position < len(rest):
        if rest[position] in keep:
            position += 1
            continue
        end = position
        while end < len(rest) and rest[end] not in keep:
            end += 1
        before = math.prod(sizes[a] for a in rest[:position])
        after = math.prod(sizes[a] for a in rest[end:])
        steps.append((before, math.prod(sizes[a] for a in rest[position:end]), after))
        del rest[position:end]
    return steps


def _kept_suffix(attrs: Clique, keep: Clique) -> int:
    """Return how many of the last axes of ``attrs`` are in ``keep``.

    >>> _kept_suffix((0, 1, 2, 3), (0, 2, 3))
    2
    """
    return next((i for i, a in enumerate(reversed(attrs)) if a not in keep), len(attrs))


def _flat_index(attrs: Clique, keep: Clique, sizes: Sequence[int]) -> NDArray[np.intp]:
    """For each cell of a table over ``attrs`` (C order), its cell in the table over ``keep``."""
    index = np.zeros(tuple(sizes[a] for a in attrs), dtype=np.intp)
    stride = 1
    for a in reversed(keep):
        axis = attrs.index(a)
        index += (np.arange(sizes[a], dtype=np.intp) * stride).reshape(
            tuple(sizes[a] if i == axis else 1 for i in range(len(attrs)))
        )
        stride *= sizes[a]
    return index.reshape(-1)


def _elimination_cliques(sizes: Sequence[int], cliques: Sequence[Clique]) -> list[Clique]:
    """Maximal cliques of a triangulation (greedy min-weight elimination) of the cliques' graph."""
    neighbours: dict[int, set[int]] = {a: set() for a in range(len(sizes))}
    for clique in cliques:
        for a, b in itertools.combinations(clique, 2):
            neighbours[a].add(b)
            neighbours[b].add(a)
    found: list[Clique] = []
    remaining = set(neighbours)
    while remaining:

        def weight(v: int) -> tuple[float, int]:
            cells = float(sizes[v])
            for u in neighbours[v]:
                cells *= sizes[u]
            return cells, v

        v = min(remaining, key=weight)
        clique = tuple(sorted({v} | neighbours[v]))
        found.append(clique)
        for a, b in itertools.combinations(neighbours[v], 2):
            neighbours[a].add(b)
            neighbours[b].add(a)
        for u in neighbours[v]:
            neighbours[u].discard(v)
        remaining.discard(v)
        del neighbours[v]
    maximal = [c for c in found if not any(set(c) < set(d) for d in found)]
    return sorted(set(maximal), key=lambda c: (-len(c), c))


def junction_tree_size(sizes: Sequence[int], cliques: Sequence[Clique]) -> int:
    """Cells of the junction tree the cliques' graph would have (the model's size).

    >>> junction_tree_size((2, 3, 4), [(0, 1), (1, 2)])
    18
    """
    return sum(math.prod(sizes[a] for a in c) for c in _elimination_cliques(sizes, cliques))


class JunctionTree:
    """A junction tree of the cliques' graph: its cliques, a rooted order and separators.

    Parameters
    ----------
    sizes : sequence of int
        The domain size of each attribute.
    cliques : sequence of tuple of int
        Attribute sets that must each lie in one clique of the tree.
    """

    def __init__(self, sizes: Sequence[int], cliques: Sequence[Clique]) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        self.cliques = _elimination_cliques(
            self.sizes, [*cliques, *((a,) for a in range(len(sizes)))]
        )
        n = len(self.cliques)
        # Maximum spanning tree on shared attributes (Kruskal); empty separators join components.
        edges = sorted(
            (
                (len(set(a) & set(b)), i, j)
                for (i, a), (j, b) in itertools.combinations(enumerate(self.cliques), 2)
            ),
            key=lambda e: -e[0],
        )
        parent = list(range(n))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        adjacent: dict[int, list[int]] = {i: [] for i in range(n)}
        for _, i, j in edges:
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[ri] = rj
                adjacent[i].append(j)
                adjacent[j].append(i)
        self.order: list[int] = []  # breadth-first from clique 0: parents before children
        self.parent: dict[int, int | None] = {0: None}
        queue = [0]
        while queue:
            node = queue.pop(0)
            self.order.append(node)
            for other in adjacent[node]:
                if other not in self.parent:
                    self.parent[other] = node
                    queue.append(other)
        self.children: dict[int, list[int]] = {i: [] for i in range(n)}
        for child, up in self.parent.items():
            if up is not None:
                self.children[up].append(child)
        self._separators = {i: self._separator(i) for i in range(n)}
        self._kept_maps: dict[int, tuple[_Map, _Map]] | None = None

    def _separator(self, child: int) -> Clique:
        up = self.parent[child]
        if up is None:
            return ()
        return tuple(sorted(set(self.cliques[child]) & set(self.cliques[up])))

    def separator(self, child: int) -> Clique:
        """Return the attributes a clique shares with its parent (empty at the root)."""
        return self._separators[child]

    def containing(self, attrs: Clique) -> int | None:
        """Return the index of the smallest clique containing ``attrs``, or None."""
        best: int | None = None
        for i, c in enumerate(self.cliques):
            if set(attrs) <= set(c) and (best is None or len(c) < len(self.cliques[best])):
                best = i
        return best

    @property
    def size(self) -> int:
        """Cells of all the cliques' tables."""
        return sum(math.prod(self.sizes[a] for a in c) for c in self.cliques)

    def calibrate(
        self, potentials: Sequence[FloatArray], *, compact: bool = False
    ) -> list[FloatArray]:
        """Return each clique's marginal (probabilities) of ``p ∝ exp(sum of potentials)``.

        Two passes of sum-product belief propagation, messages in log space. Upward, each
        clique's potential plus its children's messages, summed to its separator; downward,
        a clique's marginal times ``exp`` of its parent's message, and the message to a child
        is the clique's marginal summed to their separator divided by the child's upward
        message (Shafer-Shenoy's division; the product over the other children is not
        recomputed).

        ``compact``: the marginals of cliques of at least ``LEAST`` cells in float32
        (``_COMPACT``, in fits of accelerated steps only); the messages stay in float64.
        """
        maps = self._maps()
        up: dict[int, FloatArray] = {}
        partial: dict[int, FloatArray] = {}
        for node in reversed(self.order):
            belief = potentials[node]
            for child in self.children[node]:
                belief = maps[child][1].added(up[child], belief)
            partial[node] = belief
            if self.parent[node] is not None:
                up[node] = maps[node][0].log_sum_exp(belief)
        beliefs: list[FloatArray] = [np.empty(0)] * len(self.cliques)
        down: dict[int, FloatArray] = {}
        for node in self.order:
            belief = partial[node]
            if self.parent[node] is not None:
                belief = maps[node][0].added(down[node], belief)
            beliefs[node], log_z = _normalised(belief, _marginal_dtype(belief.size, compact))
            for child in self.children[node]:
                sums = maps[child][1].project(beliefs[node])
                with np.errstate(divide="ignore"):
                    down[child] = np.log(sums) + (log_z - up[child])
        return beliefs

    def _maps(self) -> dict[int, tuple[_Map, _Map]]:
        """Per non-root clique: maps from it, and from its parent, to their separator."""
        if self._kept_maps is None:
            self._kept_maps = {}
            for node in self.order:
                up = self.parent[node]
                if up is not None:
                    sep = self.separator(node)
                    self._kept_maps[node] = (
                        _Map(self.cliques[node], sep, self.sizes),
                        _Map(self.cliques[up], sep, self.sizes),
                    )
        return self._kept_maps


@dataclass
class Model:
    """A fitted graphical model: clique marginals of a distribution, and the number of rows.

    Attributes
    ----------
    tree : JunctionTree
    marginals : list of ndarray
        Each junction-tree clique's marginal distribution (probabilities, calibrated).
    total : float
        The estimated number of rows ``N``.
    loss : float
        The final value of the weighted squared loss.
    iterations : int
        Mirror-descent iterations run.
    potentials : list of ndarray
        The natural parameters (log-potentials) of each clique, for a warm start.
    accelerated : int
        Of the iterations, those of the accelerated phase (see ``discrepancy`` in
        :func:`fit_model`).
    """

    tree: JunctionTree
    marginals: list[FloatArray]
    total: float
    loss: float = math.nan
    iterations: int = 0
    potentials: list[FloatArray] = field(default_factory=list)
    accelerated: int = 0
    _kept: dict[Clique, FloatArray] = field(default_factory=dict, init=False, repr=False)

    @property
    def cliques(self) -> list[Clique]:
        """The junction tree's cliques."""
        return self.tree.cliques

    def marginal(self, attrs: Sequence[int]) -> FloatArray:
        """Return the model's counts over ``attrs`` (sorted), flattened: ``N p(x_attrs)``.

        Read from a clique containing them, else by variable elimination over the calibrated
        tree (``p = prod_C mu_C / prod_S mu_S``). Marginals already computed are kept, and a
        marginal contained in one of them is summed from the smallest such (AIM asks for every
        subset of its workload's cliques, largest first, each round).
        """
        table = self._probabilities(tuple(sorted(attrs)))
        return np.asarray(table.reshape(-1) * self.total, dtype=np.float64)

    def keep_marginals(self, cliques: Sequence[Sequence[int]]) -> None:
        """Compute the marginals over ``cliques`` that lie in a clique of the tree, and keep them.

        The targets of each tree clique are summed from its marginal through a tree of
        intermediate tables (:func:`_projections`, as the fit's loss does): the large marginal
        is read a few times instead of once per target. Later :meth:`marginal` calls return
        them (AIM asks for every candidate's marginal each round).
        """
        wanted = sorted({tuple(sorted(c)) for c in cliques} - self._kept.keys())
        by_home: dict[int, list[tuple[Clique, int]]] = {}
        for i, clique in enumerate(wanted):  # i: the target's number in the projection tree
            home = self.tree.containing(clique)
            if home is not None:
                by_home.setdefault(home, []).append((clique, i))
        for home, targets in by_home.items():
            plan = _projection_plan(
                self.tree.cliques[home],
                targets,
                self.tree.sizes,
                lambda attrs, keep: functools.partial(_project, attrs=attrs, keep=keep),
            )
            for (node, _), table in zip(
                plan, _summed_down(plan, self.marginals[home]), strict=True
            ):
                if node.measurement is not None:
                    self._kept[node.attrs] = table

    def _probabilities(self, clique: Clique) -> FloatArray:
        """Return ``p(x_clique)`` (shaped over the clique), kept for later calls."""
        table = self._kept.get(clique)
        if table is None:
            kept = [c for c in self._kept if set(clique) <= set(c)]
            source = min(kept, key=lambda c: self._kept[c].size, default=None)
            at = self.tree.containing(clique)
            if source is not None and (
                at is None or self._kept[source].size < self.marginals[at].size
            ):
                table = _project(self._kept[source], source, clique)
            elif at is not None:
                table = _project(self.marginals[at], self.tree.cliques[at], clique)
            else:
                found = self._on_subtree(clique)
                table = self._eliminate(clique) if found is None else found
            self._kept[clique] = table
        return table

    def _on_subtree(self, keep: Clique) -> FloatArray | None:
        """Return ``p(x_keep)`` from the fewest cliques that hold ``keep`` (None: too large).

        The smallest subtree whose cliques hold every attribute of ``keep`` (leaves are pruned
        while a neighbour holds their attributes of ``keep``: by the running intersection
        property it then holds them), and on it ``p = mu_top prod_C mu_C / mu_S``, the
        cliques below the subtree's top entering as conditionals on their separators: each
        clique's marginal is first summed to what the product needs (``keep`` and its
        separators in the subtree), and messages go up the subtree, summed to ``keep`` and
        the separator as they go. ``None`` when a product would exceed the largest clique (or
        ``_SUBTREE_CELLS``).
        """
        tree = self.tree
        sizes = tree.sizes
        want = set(keep)
        nodes = set(range(len(tree.cliques)))
        pruned = True
        while pruned:
            pruned = False
            for v in sorted(nodes):
                near = [u for u in [tree.parent[v], *tree.children[v]] if u in nodes]
                if len(near) == 1 and want & set(tree.cliques[v]) <= set(tree.cliques[near[0]]):
                    nodes.discard(v)
                    pruned = True
        limit = max(_SUBTREE_CELLS, *(math.prod(sizes[a] for a in c) for c in tree.cliques))
        messages: dict[int, tuple[Clique, FloatArray]] = {}
        result: FloatArray | None = None
        for v in reversed(tree.order):
            if v not in nodes:
                continue
            top = tree.parent[v] not in nodes
            sep = () if top else tree.separator(v)
            kids = [c for c in tree.children[v] if c in nodes]
            links = set(sep).union(*(tree.separator(c) for c in kids))
            needed = tuple(a for a in tree.cliques[v] if a in want or a in links)
            table = self._probabilities(needed)
            if sep:  # a conditional on the separator (0 where the separator has no mass)
                below = _project(table, needed, sep).reshape(_shape(sep, needed, sizes))
                with np.errstate(divide="ignore", invalid="ignore"):
                    table = np.where(below > 0, table / np.where(below > 0, below, 1.0), 0.0)
            scope = tuple(sorted(set(needed).union(*(messages[c][0] for c in kids))))
            if math.prod(sizes[a] for a in scope) > limit:
                return None
            product = np.broadcast_to(
                table.reshape(_shape(needed, scope, sizes)), tuple(sizes[a] for a in scope)
            )
            for c in kids:
                attrs, message = messages.pop(c)
                product = product * message.reshape(_shape(attrs, scope, sizes))
            out = tuple(a for a in scope if a in want or a in sep)
            summed = _project(np.asarray(product, dtype=np.float64), scope, out)
            if top:
                result = summed
            else:
                messages[v] = (out, summed)
        if result is None or result.shape != tuple(sizes[a] for a in keep):
            return None
        total = float(result.sum())
        return result / total if total > 0 else result

    def _eliminate(self, keep: Clique) -> FloatArray:
        tree = self.tree
        factors: list[tuple[Clique, FloatArray]] = []
        for node, table in enumerate(self.marginals):
            attrs = tree.cliques[node]
            factors.append((attrs, np.log(np.maximum(table, _TINY))))
            sep = tree.separator(node)
            if tree.parent[node] is not None:
                factors.append((sep, -np.log(np.maximum(_project(table, attrs, sep), _TINY))))
        others = {a for attrs, _ in factors for a in attrs} - set(keep)
        while others:
            v = min(others, key=lambda u: _joined_cells(factors, u, tree.sizes))
            involved = [f for f in factors if v in f[0]]
            factors = [f for f in factors if v not in f[0]]
            attrs = tuple(sorted({x for f in involved for x in f[0]}))
            total = np.zeros(tuple(tree.sizes[a] for a in attrs))
            for f_attrs, f_values in involved:
                total = total + f_values.reshape(_shape(f_attrs, attrs, tree.sizes))
            factors.append((tuple(a for a in attrs if a != v), _lse(total, (attrs.index(v),))))
            others.discard(v)
        result = np.zeros(tuple(tree.sizes[a] for a in keep))
        for f_attrs, f_values in factors:
            result = result + f_values.reshape(_shape(f_attrs, keep, tree.sizes))
        result = np.exp(result - float(_lse(result, tuple(range(result.ndim)))))
        return np.asarray(result, dtype=np.float64)

    def sample(self, rows: int, source: RandomSource | None = None) -> NDArray[np.int64]:
        """Draw ``rows`` synthetic rows (one column per attribute, values as indices).

        Along the tree from its root, one attribute at a time: each clique's new attributes in
        turn, those with fewer values first, each given the values already drawn of the
        clique's other attributes (its separator and the new attributes before it), as in
        ``mbi``. Within each group of rows that share those values, each value's count is the
        expected one rounded, with the remainders carried from group to group in the order of
        the values drawn (:func:`_carried_counts`): the counts over all the groups that share
        the first values drawn are then also within a few rows of the model's, however small
        the groups. The values are laid evenly along the group's rows sorted by the attributes
        drawn before outside the clique, so that they are also spread in proportion over those
        (balanced sampling: given the clique's other attributes the model makes the new one
        independent of them). Randomness from :mod:`dpcurator.noise`; this is
        post-processing.
        """
        src = resolve_source(source)
        tree = self.tree
        out = np.zeros((rows, len(tree.sizes)), dtype=np.int64)
        if rows == 0:
            return out
        drawn: list[int] = []
        for node in tree.order:
            sep = tree.separator(node)
            given = list(sep)
            new = sorted(
                (a for a in tree.cliques[node] if a not in sep), key=lambda a: tree.sizes[a]
            )
            for a in new:
                keep = tuple(sorted((*given, a)))
                axes = [keep.index(b) for b in (*given, a)]
                joint = np.transpose(self._probabilities(keep), axes).reshape(-1, tree.sizes[a])
                group = (
                    np.ravel_multi_index(
                        tuple(out[:, b] for b in given), tuple(tree.sizes[b] for b in given)
                    )
                    if given
                    else np.zeros(rows, dtype=np.int64)
                )
                others = [out[:, b] for b in drawn if b not in given]
                out[:, a] = _drawn(joint, np.asarray(group, dtype=np.int64), src, others)
                given.append(a)
                drawn.append(a)
        return out


def _drawn(
    joint: FloatArray,
    group: NDArray[np.int64],
    source: RandomSource,
    others: Sequence[NDArray[np.int64]] = (),
) -> NDArray[np.int64]:
    """Draw each row's value given its group: row ``g`` of ``joint`` is ``p(group g, value)``.

    **Counts** (:func:`_carried_counts`): each group's count of each value is its expected
    count ``n p`` (``n`` the group's rows, ``p`` the group's conditional probability, uniform
    where the group has no mass) rounded with the remainders carried from group to group, in
    the order of the groups' numbers, so that the counts of a value over any run of
    consecutive groups are also within a few rows of their expectation.

    **Placement** (balanced sampling): the group's rows are sorted by ``others`` (the values
    of attributes drawn before, first array most significant; ties in random order), and the
    ``c`` rows of a value are spread evenly along them, the ``k``-th at ``(k + V) / c`` of the
    way with one uniform ``V`` per value. Any run of consecutive rows, such as those sharing
    the first of ``others``, then holds each value in proportion to within about a row. In
    random order it would be off by about the square root of the run's length, and those
    deviations showed as sampling error in every marginal that crosses the attribute with an
    earlier one (Adult and CPS in BENCHMARKS.md).
    """
    rows = group.size
    width = joint.shape[1]
    mass = joint.sum(axis=1, keepdims=True)
    conditional = np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), 1.0 / width)
    groups, sizes = np.unique(group, return_counts=True)  # ascending
    counts = _carried_counts(conditional[groups], sizes, source)
    tiebreak = uniform_integers(2**62, rows, source=source)
    order = np.lexsort((tiebreak, *reversed(others), group))
    sorted_groups = group[order]
    position = np.arange(rows)
    # Each group's values in ascending order, the groups in ascending order (as sorted_groups).
    chosen = np.repeat(np.tile(np.arange(width), groups.size), counts.reshape(-1))
    first, last = _runs(sorted_groups * width + chosen)  # the rows of one (group, value)
    spread = (position - first + _one_per_run(first, source)) / (last - first)
    values = np.empty(rows, dtype=np.int64)
    values[order] = chosen[np.lexsort((spread, sorted_groups))]
    return values


_CHAIN = 1024
"""Most groups whose rounding remainders :func:`_carried_counts` carries one to the next.

More groups are cut into chains of at most this many consecutive groups, rounded side by
side (a step per group of a chain, numpy across the chains): the steps in Python stay at most
this many whatever the rows. On Adult at epsilon 10 (up to 30,000 groups), chains of 1,024
gave the errors of one chain (3-way 0.0263 against 0.0262, target 0.0017) in 0.09 s.
"""


def _carried_counts(
    conditional: FloatArray, sizes: NDArray[np.int64], source: RandomSource
) -> NDArray[np.int64]:
    r"""Round each group's expected counts ``n_g p_g`` to integers summing to ``n_g``.

    Controlled rounding with carried remainders (error diffusion along the groups): group
    ``g``'s target is ``t_g = n_g p_g + r_{g-1}``, its counts are ``t_g`` rounded down (at
    least 0), then the largest remainders rounded up (or, where the floors exceed ``n_g``,
    the smallest taken down) until they sum to ``n_g``, and ``r_g = t_g - c_g`` carries on.
    For each value, the counts over the first ``k`` groups then miss their expectation by
    ``r_0 - r_k``, a few rows at most whatever ``k`` (a remainder stays within about
    ``(-1, 2)``); rounded group by group, the misses would add up like a random walk, about
    the square root of the number of groups. ``r_0``: uniform, less its mean (one draw per
    value and chain); groups beyond ``_CHAIN`` start new chains.

    Sampling a one-clique model of Adult at epsilon 10 (the last attributes' groups hold one
    or two rows each): the 2-way marginals with income went from 0.0033 to 0.0017 in L1,
    the model's own error (session 23).
    """
    count, width = conditional.shape
    chains = -(-count // _CHAIN)
    length = -(-count // chains)
    padding = chains * length - count
    table = np.concatenate([conditional, np.zeros((padding, width))]).reshape(chains, length, width)
    rows = np.concatenate([sizes, np.zeros(padding, dtype=sizes.dtype)]).reshape(chains, length)
    start = uniform_integers(2**53, chains * width, source=source).reshape(chains, width)
    carried = (start - start.mean(axis=1, keepdims=True)) / float(2**53)
    counts = np.empty((chains, length, width), dtype=np.int64)
    for step in range(length):
        wanted = rows[:, step].astype(np.float64)
        target = wanted[:, None] * table[:, step] + carried
        rounded = np.maximum(np.floor(target), 0.0)
        short = wanted - rounded.sum(axis=1)
        if np.any(short > 0):  # the largest remainders up
            rounded += _ranks(rounded - target) < short[:, None]
        over = rounded.sum(axis=1) - wanted
        while np.any(over > 0):  # floors above the group's rows: the smallest remainders down
            held = rounded > 0
            rounded -= held & (_ranks(np.where(held, target - rounded, np.inf)) < over[:, None])
            over = rounded.sum(axis=1) - wanted
        carried = target - rounded
        counts[:, step] = rounded
    return counts.reshape(chains * length, width)[:count]


def _ranks(keys: FloatArray) -> NDArray[np.intp]:
    """Each key's rank in its row, ascending (ties in the order of the columns)."""
    return np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")


def _runs(keys: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Each position's run of equal ``keys`` (sorted): its first position and one past its last."""
    return np.searchsorted(keys, keys, side="left"), np.searchsorted(keys, keys, side="right")


def _one_per_run(start: NDArray[np.intp], source: RandomSource) -> FloatArray:
    """One uniform in ``[0, 1)`` per run (``start``: each position's run start), per position."""
    first = start == np.arange(start.size)
    drawn = uniform_integers(2**53, int(first.sum()), source=source) / float(2**53)
    return np.asarray(drawn[np.cumsum(first) - 1], dtype=np.float64)


def _joined_cells(
    factors: Sequence[tuple[Clique, FloatArray]], v: int, sizes: Sequence[int]
) -> float:
    """Cells of the factor that eliminating ``v`` would build."""
    joined = {a for attrs, _ in factors if v in attrs for a in attrs}
    return float(math.prod(sizes[a] for a in joined))


def _merged(measurements: Sequence[Marginal]) -> list[Marginal]:
    """Return one measurement per clique: the inverse-variance weighted mean of its measurements.

    ``sum_i |x - y_i|^2 / sigma_i^2 = |x - y|^2 / sigma^2 + const`` with ``1/sigma^2 = sum_i
    1/sigma_i^2`` and ``y = sigma^2 sum_i y_i / sigma_i^2``: the loss is the same up to a constant.
    """
    groups: dict[Clique, list[Marginal]] = {}
    for m in measurements:
        groups.setdefault(m.clique, []).append(m)
    out = []
    for clique, group in groups.items():
        if len(group) == 1:
            out.append(group[0])
            continue
        weights = [1.0 / (m.sigma * m.sigma) for m in group]
        values = sum(w * m.values for w, m in zip(weights, group, strict=True)) / sum(weights)
        out.append(Marginal(clique, np.asarray(values, dtype=np.float64), sum(weights) ** -0.5))
    return out


def _total(measurements: Sequence[Marginal]) -> float:
    """Return the inverse-variance weighted mean of the measurements' totals (at least 1)."""
    weights = np.array([1.0 / (m.sigma**2 * m.values.size) for m in measurements])
    totals = np.array([float(m.values.sum()) for m in measurements])
    return max(1.0, float(weights @ totals / weights.sum()))


def _initial(
    tree: JunctionTree, measurements: Sequence[Marginal], homes: Sequence[int], total: float
) -> list[FloatArray]:
    """Start from the junction-tree factorisation ``prod mu_C / prod mu_S`` of the noisy data.

    Each clique takes the log of its largest measured marginal (counts clipped at 1/2, as
    frequencies), less its separator's log marginal: exact when the measured cliques are the
    tree's and consistent, a good start otherwise (post-processing of the noisy marginals).
    """
    theta = [np.zeros(tuple(tree.sizes[a] for a in c)) for c in tree.cliques]
    chosen: dict[int, Marginal] = {}
    for m, home in zip(measurements, homes, strict=True):
        if home not in chosen or len(m.clique) > len(chosen[home].clique):
            chosen[home] = m
    for home, m in chosen.items():
        attrs = tree.cliques[home]
        table = np.log(np.maximum(m.values, 0.5) / total).reshape(
            tuple(tree.sizes[a] for a in m.clique)
        )
        theta[home] = theta[home] + table.reshape(_shape(m.clique, attrs, tree.sizes))
        sep = tree.separator(home)
        if sep and set(sep) <= set(m.clique):
            counts = _project(
                np.maximum(m.values, 0.5).reshape(tuple(tree.sizes[a] for a in m.clique)),
                m.clique,
                sep,
            )
            log_sep = np.log(counts / counts.sum())
            theta[home] = theta[home] - log_sep.reshape(_shape(sep, attrs, tree.sizes))
    return theta


@dataclass(frozen=True)
class _Node:
    """A table the loss projects onto: a measured clique, or an intermediate shared by several."""

    attrs: Clique
    parent: int | None
    """Position of the table it is summed from (None: its home clique's marginal)."""
    measurement: int | None
    """The measurement it estimates (None: an intermediate table)."""


_Summer = TypeVar("_Summer")


def _projection_plan(
    attrs: Clique,
    targets: Sequence[tuple[Clique, int]],
    sizes: Sequence[int],
    summer: Callable[[Clique, Clique], _Summer],
) -> list[tuple[_Node, _Summer]]:
    """Return the nodes of :func:`_projections` from ``attrs``, each with ``summer(parent, own)``.

    ``parent`` is the attributes of the table a node is summed from (``attrs`` for the top
    ones), ``own`` the node's: the pair :func:`_summed_down` walks.
    """
    nodes: list[_Node] = []
    _projections(attrs, sorted(targets), sizes, None, nodes)
    return [
        (node, summer(attrs if node.parent is None else nodes[node.parent].attrs, node.attrs))
        for node in nodes
    ]


def _summed_down(
    plan: Sequence[tuple[_Node, Callable[[FloatArray], FloatArray]]], top: FloatArray
) -> list[FloatArray]:
    """Return each node's table (:func:`_projections`), its sum of ``top`` or of its parent's."""
    tables: list[FloatArray] = []
    for node, summed in plan:  # parents first
        tables.append(summed(top if node.parent is None else tables[node.parent]))
    return tables


def _projections(
    attrs: Clique,
    targets: Sequence[tuple[Clique, int]],
    sizes: Sequence[int],
    parent: int | None,
    out: list[_Node],
) -> None:
    """Append the nodes that project a table over ``attrs`` onto each target (measurement).

    Greedy: while several targets lack one attribute, sum that attribute out once (the one that
    saves the most cell reads) into an intermediate table and project those targets from it,
    recursively; the others are summed from the table directly. Parents come before children.
    """
    cells = math.prod(sizes[a] for a in attrs)
    remaining = list(targets)
    while len(remaining) > 1:
        best: tuple[float, int] | None = None
        for a in attrs:
            group = sum(1 for clique, _ in remaining if a not in clique)
            saved = (group - 1) * cells - group * cells / sizes[a]
            if group > 1 and saved > 0 and (best is None or saved > best[0]):
                best = (saved, a)
        if best is None:
            break
        dropped = best[1]
        group_targets = [t for t in remaining if dropped not in t[0]]
        remaining = [t for t in remaining if dropped in t[0]]
        inner = tuple(a for a in attrs if a != dropped)
        same = [t for t in group_targets if t[0] == inner]
        out.append(_Node(inner, parent, same[0][1] if same else None))
        _projections(inner, [t for t in group_targets if t[0] != inner], sizes, len(out) - 1, out)
    for clique, measurement in remaining:
        out.append(_Node(clique, parent, measurement))
        if clique == attrs:
            continue


@dataclass(frozen=True)
class _Evaluation:
    """The loss at a point, each measurement's estimate and slope, and the projected tables.

    The gradient follows from the slopes (:meth:`_Objective.gradient`), computed only for the
    points the line search accepts.
    """

    loss: float
    estimates: FloatArray
    """The measurements' estimates ``N mu_C``, one after the other (``_Objective.offsets``)."""
    slopes: FloatArray
    """``(N mu_C - y_C) / sigma_C^2``, laid out as ``estimates``."""
    tables: dict[int, list[FloatArray]]
    shapes: list[tuple[int, ...]]


class _Objective:
    r"""The weighted squared loss ``sum_C |N mu_C - y_C|^2 / (2 sigma_C^2)`` and its gradient.

    The measurements of one junction-tree clique (their home) are projected from its marginal
    through a tree of tables (see :func:`_projections`): several measured cliques that lack an
    attribute are summed from one table with that attribute summed out, so the large tables are
    read a few times per evaluation instead of once per measurement; the gradient flows back
    through the same tree. The values are those of projecting every measurement from its home
    (the sums are regrouped only).
    """

    def __init__(
        self,
        tree: JunctionTree,
        measurements: Sequence[Marginal],
        homes: Sequence[int],
        total: float,
    ) -> None:
        self.tree = tree
        self.measurements = list(measurements)
        self.total = total
        self.offsets = np.cumsum([0, *(m.values.size for m in measurements)])
        """Where each measurement's cells start in the evaluations' flat vectors."""
        self.observed = np.concatenate([m.values for m in measurements])
        self.inverse_sigma = np.concatenate(
            [np.full(m.values.size, 1.0 / m.sigma) for m in measurements]
        )
        by_home: dict[int, list[tuple[Clique, int]]] = {}
        for i, (m, home) in enumerate(zip(measurements, homes, strict=True)):
            by_home.setdefault(home, []).append((m.clique, i))
        self.plans: dict[int, list[tuple[_Node, _Map]]] = {}
        self.identity = {
            home: _Map(tree.cliques[home], tree.cliques[home], tree.sizes) for home in by_home
        }
        """Per home clique: the map of its table onto itself (a gradient summed into one term)."""
        for home, targets in sorted(by_home.items()):
            self.plans[home] = _projection_plan(
                tree.cliques[home],
                targets,
                tree.sizes,
                lambda attrs, keep: _Map(attrs, keep, tree.sizes),
            )

    def __call__(self, mu: Sequence[FloatArray]) -> _Evaluation:
        """Return the loss at ``mu`` (the clique marginals), with the measurements' estimates."""
        measured: list[FloatArray] = [np.empty(0)] * len(self.measurements)
        kept: dict[int, list[FloatArray]] = {}
        for home, plan in self.plans.items():
            kept[home] = _summed_down([(node, sums.project) for node, sums in plan], mu[home])
            for (node, _), table in zip(plan, kept[home], strict=True):
                if node.measurement is not None:
                    measured[node.measurement] = table.reshape(-1)
        estimates = np.concatenate(measured) * self.total
        scaled = (estimates - self.observed) * self.inverse_sigma
        loss = 0.5 * float(scaled @ scaled)
        slopes = scaled * self.inverse_sigma
        return _Evaluation(loss, estimates, slopes, kept, [t.shape for t in mu])

    def gradient(self, at: _Evaluation) -> _Gradient:
        """Return the loss's gradient with respect to each clique's marginal at ``at``.

        Children first: each table's slopes are broadcast into its parent's; the top tables'
        are kept as terms of their clique's gradient (the sum of their broadcasts, which
        :func:`_stepped` adds to the potentials without building it, once per trial step); a
        table too small for threads gets the sum itself, built once for all the trials.
        """
        gradient: _Gradient = [[] for _ in at.shapes]
        for home, plan in self.plans.items():
            tables = at.tables[home]
            accumulated: list[FloatArray | None] = [None] * len(plan)
            for position in range(len(plan) - 1, -1, -1):
                node, projection = plan[position]
                values = accumulated[position]
                if node.measurement is not None:
                    start, stop = self.offsets[node.measurement : node.measurement + 2]
                    own = at.slopes[start:stop].reshape(tables[position].shape)
                    values = own if values is None else values + own
                if values is None:
                    continue
                if node.parent is None:
                    gradient[home].append((projection, values))
                    continue
                held = accumulated[node.parent]
                accumulated[node.parent] = projection.added(values, held, held)
            if len(gradient[home]) > 1 and math.prod(at.shapes[home]) < _LEAST:
                gradient[home] = [(self.identity[home], _summed(gradient[home]))]
        return gradient

    def predicted(self, before: _Evaluation, after: _Evaluation) -> float:
        """``<grad L(before), mu_before - mu_after>``, from the measured projections alone."""
        return float(before.slopes @ (before.estimates - after.estimates))


def fit_model(
    sizes: Sequence[int],
    measurements: Sequence[Marginal],
    *,
    iterations: int = 1000,
    extra_cliques: Sequence[Clique] = (),
    warm_start: Model | None = None,
    start: Literal["factorisation", "uniform"] = "factorisation",
    discrepancy: float | None = None,
    plain_steps: int | None = None,
    tolerance: float = 0.0,
    deadline: float | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> Model:
    """Fit a graphical model to noisy marginals by mirror descent (see the module's docstring).

    Parameters
    ----------
    sizes : sequence of int
        The domain size of each attribute.
    measurements : sequence of Marginal
        The noisy marginals (at least one).
    iterations : int, default 1000
        Most mirror-descent steps (of both phases, see ``discrepancy``).
    extra_cliques : sequence of tuple of int
        Further cliques the model must hold (none measured).
    warm_start : Model, optional
        A model whose potentials start the descent (cliques contained in the new tree's).
    start : {"factorisation", "uniform"}, default "factorisation"
        Without ``warm_start``: start from the junction-tree factorisation of the noisy
        marginals, or from the uniform distribution (zero potentials, as ``mbi``).
    discrepancy : float, optional
        If given (``tau > 0``), the descent begins with accelerated steps (Nesterov's
        extrapolation, FISTA, with a restart whenever the loss rises) until the loss is at most
        ``tau`` times its expected value at the true marginals, ``E L(mu*) = m / 2`` for ``m``
        measured cells (Morozov's discrepancy level: no fit needs to match the noisy
        marginals better than the truth does, so the fast phase, which overshoots, stops
        there); plain mirror descent continues from that point.
    plain_steps : int, optional
        Most plain steps after the accelerated phase (default: up to ``iterations`` in all).
        The accelerated steps work on the large cliques in float32 (``_COMPACT``), the plain
        ones in float64.
    tolerance : float, default 0
        Stop once the last ``_WINDOW`` (50) plain steps lowered the loss by less than this
        fraction of it (0: run all the iterations).
    deadline : float, optional
        A ``time.monotonic()`` value after which the descent stops.
    callback : callable, optional
        Called with ``(iteration, loss)`` after each step.

    Returns
    -------
    Model

    Examples
    --------
    >>> import numpy as np
    >>> noisy = [Marginal((0,), np.array([60.0, 40.0]), 2.0),
    ...          Marginal((0,), np.array([64.0, 36.0]), 4.0)]  # the first weighs 4 times more
    >>> model = fit_model((2,), noisy, iterations=200)
    >>> [round(float(v), 1) for v in model.marginal((0,))]
    [60.8, 39.2]
    """
    if not measurements:
        raise InvalidParameterError("measurements", [], "must hold at least one noisy marginal")
    if not 0.0 <= tolerance < 1.0:
        raise InvalidParameterError("tolerance", tolerance, "must be in [0, 1)")
    if start not in ("factorisation", "uniform"):
        raise InvalidParameterError("start", start, "must be 'factorisation' or 'uniform'")
    if discrepancy is not None and not (math.isfinite(discrepancy) and discrepancy > 0.0):
        raise InvalidParameterError("discrepancy", discrepancy, "must be a positive number")
    if plain_steps is not None and plain_steps < 0:
        raise InvalidParameterError("plain_steps", plain_steps, "must be >= 0")
    raise_thresholds()  # the tables freed between steps stay in the heap (see _allocator)
    total = _total(measurements)
    measurements = _merged(measurements)
    tree = JunctionTree(sizes, [m.clique for m in measurements] + list(extra_cliques))
    at = [tree.containing(m.clique) for m in measurements]
    assert all(i is not None for i in at)
    homes = [int(i) for i in at if i is not None]
    shapes = [tuple(tree.sizes[a] for a in c) for c in tree.cliques]
    if warm_start is None and start == "factorisation":
        theta = _initial(tree, measurements, homes, total)
    else:
        theta = [np.zeros(s) for s in shapes]
    if warm_start is not None:
        for old_attrs, old in zip(warm_start.tree.cliques, warm_start.potentials, strict=True):
            home = tree.containing(old_attrs)
            if home is not None:
                theta[home] = theta[home] + old.reshape(
                    _shape(old_attrs, tree.cliques[home], tree.sizes)
                )

    objective = _Objective(tree, measurements, homes, total)
    # The accelerated phase works in float32 (_COMPACT); a plain phase after it in float64.
    compact = discrepancy is not None
    if compact and _COMPACT_POTENTIALS:
        theta = [t.astype(_marginal_dtype(t.size, compact), copy=False) for t in theta]
    mu = tree.calibrate(theta, compact=compact)
    current = objective(mu)
    step = 1.0 / (total * max(1.0 / m.sigma**2 for m in measurements))
    grow = _GROW_LARGE if max(map(math.prod, shapes)) >= _LEAST else _GROW

    def descend(
        theta: list[FloatArray], at: _Evaluation, gradient: _Gradient, step: float
    ) -> tuple[list[FloatArray], list[FloatArray], _Evaluation, float] | None:
        """One step from ``theta`` with Armijo backtracking (None: no step lowers the loss)."""
        for _ in range(_BACKTRACKS):
            trial, trial_mu = _calibrated_step(tree, theta, gradient, -step, compact)
            evaluated = objective(trial_mu)
            if at.loss - evaluated.loss >= 0.5 * objective.predicted(at, evaluated):
                return trial, trial_mu, evaluated, step
            step *= _SHRINK
        return None

    done = accelerated = 0
    converged = False
    if discrepancy is not None:
        level = discrepancy * 0.5 * sum(m.values.size for m in measurements)
        theta, mu, current, step, done, converged = _accelerate(
            tree,
            objective,
            descend,
            start=(theta, mu, current, step),
            level=level,
            iterations=iterations,
            deadline=deadline,
            callback=callback,
            compact=compact,
            grow=grow,
        )
        accelerated = done
    if plain_steps is not None:
        iterations = min(iterations, done + plain_steps)
    if compact and done < iterations and not converged:  # the plain phase, in float64
        compact = False  # read by descend
        theta = [t.astype(np.float64, copy=False) for t in theta]
        mu = tree.calibrate(theta)
        current = objective(mu)
    gradient = objective.gradient(current)
    history = [current.loss]
    for step_number in range(done + 1, iterations + 1):
        if converged or (deadline is not None and time.monotonic() > deadline):
            break
        found = descend(theta, current, gradient, step * grow)
        if found is None:  # no step decreases the loss beyond rounding: converged
            break
        theta, mu, current, step = found
        gradient = objective.gradient(current)
        done = step_number
        if callback is not None:
            callback(done, current.loss)
        history.append(current.loss)
        if (
            tolerance > 0
            and len(history) > _WINDOW
            and history[-_WINDOW - 1] - current.loss < tolerance * current.loss
        ):
            break
    if any(table.dtype != np.float64 for table in mu):  # the model's marginals in full
        mu = tree.calibrate(theta)
        current = objective(mu)
    return Model(tree, mu, total, current.loss, done, theta, accelerated)


_Gradient = list[list[tuple["_Map", FloatArray]]]
"""Each clique's gradient as terms ``(map, values)``: the sum of the values' broadcasts."""


def _summed(terms: list[tuple[_Map, FloatArray]]) -> FloatArray:
    """Return the sum of the terms' broadcasts (a clique's gradient) as one table."""
    total: FloatArray | None = None
    for term, values in terms:
        total = term.added(values, total, total)
    assert total is not None
    return total


def _stepped(theta: list[FloatArray], gradient: _Gradient, scale: float) -> list[FloatArray]:
    """Return ``theta + scale * gradient``, each clique's table new (or ``theta``'s, no terms)."""
    stepped = []
    for table, terms in zip(theta, gradient, strict=True):
        if not terms:
            stepped.append(table)
        elif _by_terms(terms):
            stepped.append(_plus_terms(table, terms, scale))
        else:  # the gradient itself
            stepped.append(_axpy(scale, terms[0][1].reshape(table.shape), table))
    return stepped


def _by_terms(terms: list[tuple[_Map, FloatArray]]) -> bool:
    """Whether a clique's gradient is added term by term (not one table of the clique's own)."""
    return len(terms) > 1 or (len(terms) == 1 and terms[0][0].keep != terms[0][0].attrs)


def _calibrated_step(
    tree: JunctionTree,
    theta: list[FloatArray],
    gradient: _Gradient,
    scale: float,
    compact: bool,
) -> tuple[list[FloatArray], list[FloatArray]]:
    """Return ``theta + scale * gradient`` and its cliques' marginals (``tree.calibrate``).

    Two passes: the step (:func:`_stepped`), then the calibration. On a one-clique model,
    exponentiating each row in the pass that builds it (session 20) was slower on AIM's round
    fits at Adult epsilon 10 (1.10x, three alternations): the calibration's flat pieces do the
    same work with fewer calls.
    """
    stepped_theta = _stepped(theta, gradient, scale)
    return stepped_theta, tree.calibrate(stepped_theta, compact=compact)


def _axpy(scale: float, x: FloatArray, y: FloatArray) -> FloatArray:
    """Return ``y + scale * x`` as a new table (one temporary less than the expression)."""
    out = np.multiply(x, scale, dtype=y.dtype)
    out += y
    return out


def _plus_terms(
    table: FloatArray, terms: list[tuple[_Map, FloatArray]], scale: float
) -> FloatArray:
    """Return ``table + scale * sum of the terms' broadcasts`` as a new table, in one pass.

    A few leading rows at a time (about ``_PIECE`` cells), the table's row is copied and the
    terms' broadcasts (of their values scaled beforehand) are added to it while in cache (in
    threads, by rows): each cell is the same sum whatever the threads.
    """
    shape = table.shape
    lead = next(k for k in range(len(shape) + 1) if math.prod(shape[k:]) <= _PIECE)
    rows = math.prod(shape[:lead])
    out = np.empty(shape, dtype=table.dtype)
    sources = [_rows_of(term, (values * scale).astype(table.dtype), lead) for term, values in terms]

    def run(part: slice) -> None:
        for row in range(part.start, part.stop):
            at = np.unravel_index(row, shape[:lead])
            into = out[at]
            np.copyto(into, table[at])
            for source in sources:
                into += source(at)

    in_rows(run, rows, out.size)
    return out


_VIEW_RUN = 8
"""Least run of contiguous cells in a term's broadcast for a trial step to add it as a view.

A gather through the index costs about 0.55 ns a cell whatever the pattern; adding a broadcast
view costs about 1.6, 1.0, 0.5 and 0.24 ns a cell for runs of 2, 4, 8 and 20 (float32 rows of
33,600 cells): from 8 on, the view (session 22; AIM's step at Adult epsilon 10 gathered a term
with runs of 20).
"""


def _rows_of(
    term: _Map, values: FloatArray, lead: int
) -> Callable[[tuple[np.intp, ...]], FloatArray]:
    """Return ``values`` broadcast by ``term``, as a function of a row of the table.

    The row ``at`` is its indices on the table's first ``lead`` axes. A broadcast view where
    ``term`` has no index or its broadcast has runs of at least ``_VIEW_RUN`` cells; otherwise
    the row's cells are gathered through the index, once for all the rows that share them
    (``_SHARED_ROWS``), else when asked for (a row at a time: no table of the whole size is
    built).
    """
    positions = tuple(i for i in range(lead) if term.attrs[i] in term.keep)
    leading = tuple(slice(None) if i in positions else 0 for i in range(lead))
    if term.index is None or term.run >= _VIEW_RUN:
        view = term.view(values)[leading]
        return lambda at: view[tuple(at[i] for i in positions)]
    index = term.index.reshape(term.shape)[leading]
    flat = values.reshape(-1)
    if index.size * _SHARED_ROWS <= math.prod(term.shape):  # few distinct rows: gathered once
        gathered = np.take(flat, index, mode="clip")
        return lambda at: gathered[tuple(at[i] for i in positions)]
    return lambda at: np.take(flat, index[tuple(at[i] for i in positions)], mode="clip")


_SHARED_ROWS = 4
"""A gathered term's rows are built once per step where at least this many rows share each.

A term that keeps none (or few) of the table's leading axes has the same cells in many rows:
they are gathered once and added as contiguous rows. AIM at Adult epsilon 10 adds a term over
480 cells to its 1.8 M-cell clique, the same in each of its 54 rows: a step adding it alone
(with the copy of the potentials) took 0.45-0.49 ms instead of 0.76-0.80 with a gather in
every row (two threads, session 23).
"""


def _extrapolated(
    current: FloatArray,
    previous: FloatArray,
    beta: float,
    weights: NDArray[np.floating] | None = None,
) -> tuple[FloatArray, list[tuple[float, float]]]:
    """Return ``current + beta * (current - previous)`` as a new table (in threads, by pieces).

    With ``weights``, each new piece is also exponentiated into it (:func:`_exp_part`); the
    pieces' maxima and sums are returned in order, for :func:`_rescaled` (none without).
    """
    out = np.empty(current.shape, dtype=current.dtype)
    flat, now, before = out.reshape(-1), current.reshape(-1), previous.reshape(-1)
    into = None if weights is None else weights.reshape(-1)

    def piece(part: slice) -> tuple[float, float] | None:
        np.subtract(now[part], before[part], out=flat[part])
        flat[part] *= beta
        flat[part] += now[part]
        return None if into is None else _exp_part(flat[part], into[part])

    stats = in_pieces(piece, flat.size)
    return out, [s for s in stats if s is not None]


def _calibrated_extrapolation(
    tree: JunctionTree,
    current: list[FloatArray],
    previous: list[FloatArray],
    beta: float,
    compact: bool,
) -> tuple[list[FloatArray], list[FloatArray]]:
    """Return the extrapolated potentials (:func:`_extrapolated`) and their cliques' marginals.

    A tree of one clique is extrapolated and exponentiated piece by piece in one pass: the
    same pieces and arithmetic as ``calibrate``'s, so the same marginals to the bit.
    """
    if len(current) == 1:
        weights = np.empty(current[0].shape, dtype=_marginal_dtype(current[0].size, compact))
        point, stats = _extrapolated(current[0], previous[0], beta, weights)
        _rescaled(weights.reshape(-1), pieces(weights.size), stats)
        return [point], [weights]
    points = [_extrapolated(t, p, beta)[0] for t, p in zip(current, previous, strict=True)]
    return points, tree.calibrate(points, compact=compact)


_Descend = Callable[
    [list[FloatArray], "_Evaluation", _Gradient, float],
    "tuple[list[FloatArray], list[FloatArray], _Evaluation, float] | None",
]


def _accelerate(
    tree: JunctionTree,
    objective: _Objective,
    descend: _Descend,
    *,
    start: tuple[list[FloatArray], list[FloatArray], _Evaluation, float],
    level: float,
    iterations: int,
    deadline: float | None,
    callback: Callable[[int, float], None] | None,
    compact: bool,
    grow: float,
) -> tuple[list[FloatArray], list[FloatArray], _Evaluation, float, int, bool]:
    """Accelerated mirror descent (FISTA, adaptive restart) until the loss is at most ``level``.

    Each step is a backtracking step from the extrapolated point ``y = theta_k + beta_k
    (theta_k - theta_{k-1})``, ``beta_k = (t_k - 1) / t_{k+1}`` (Beck and Teboulle 2009); when
    it raises the loss above ``theta_k``'s, the momentum is dropped and the step is retaken
    from ``theta_k`` (O'Donoghue and Candès 2015). ``start``: the potentials, their marginals,
    their evaluation and the step size; ``compact``: evaluate in float32 (see ``_COMPACT``);
    ``grow``: each step's first trial is the last step size times this. Returns the last point
    (the same four), the steps taken and whether no step lowered the loss.
    """
    theta, mu, current, step = start
    momentum = 1.0
    point, point_eval = theta, current
    done = 0
    while done < iterations and current.loss > level:
        if deadline is not None and time.monotonic() > deadline:
            break
        found = descend(point, point_eval, objective.gradient(point_eval), step * grow)
        if found is None:
            if point is theta:
                return theta, mu, current, step, done, True
            momentum, point, point_eval = 1.0, theta, current  # restart
            continue
        trial, trial_mu, evaluated, step = found
        if evaluated.loss > current.loss and point is not theta:
            momentum, point, point_eval = 1.0, theta, current  # restart
            continue
        following = (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum)) / 2.0
        beta = (momentum - 1.0) / following
        previous = theta
        theta, mu, current, momentum = trial, trial_mu, evaluated, following
        done += 1
        if callback is not None:
            callback(done, current.loss)
        if beta > 0.0:
            point, point_mu = _calibrated_extrapolation(tree, theta, previous, beta, compact)
            point_eval = objective(point_mu)
        else:
            point, point_eval = theta, current
    return theta, mu, current, step, done, False


def empty_model(sizes: Sequence[int], total: float) -> Model:
    """Return the uniform model over the domain (no measurement)."""
    tree = JunctionTree(sizes, [])
    theta = [np.zeros(tuple(tree.sizes[a] for a in c)) for c in tree.cliques]
    return Model(tree, tree.calibrate(theta), total, potentials=theta)
