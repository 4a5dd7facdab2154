"""Clipped grid sums from outer-product factors: same sums and same sensitivity as materialised."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpcurator.errors import InvalidParameterError  # noqa: E402
from dpcurator.learn import _factored_clipping  # noqa: E402
from dpcurator.learn._factored_clipping import (  # noqa: E402
    OuterFactors,
    clipped_outer_grid_sum,
    exact_row_sum,
)
from dpcurator.learn._torch_noise import (  # noqa: E402
    clipped_grid_sum,
    grid_bits,
    grid_sensitivity,
)


def materialise(layers: list[OuterFactors]) -> list[torch.Tensor]:
    """The per-example gradient parts ``g a^T`` (and ``g`` for a bias), in float64."""
    parts = []
    for f in layers:
        g, a = f.output_grads.double(), f.inputs.double()
        parts.append(g[:, :, None] * a[:, None, :])
        if f.bias:
            parts.append(g)
    return parts


def random_layers(n: int, dtype: torch.dtype, seed: int) -> list[OuterFactors]:
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)

    return [
        OuterFactors(draw(n, 7), draw(n, 5), bias=True),
        OuterFactors(draw(n, 5), draw(n, 3), bias=False),
    ]


def dimension(layers: list[OuterFactors]) -> int:
    return sum(
        int(f.inputs.shape[1] * f.output_grads.shape[1] + f.bias * f.output_grads.shape[1])
        for f in layers
    )


def test_exact_factors_give_the_materialised_sum_exactly() -> None:
    # Dyadic factors with few bits: every product is exact, so both paths round the same reals.
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-8, 9, (6, 4), generator=generator).float() / 8
    g = torch.randint(-8, 9, (6, 3), generator=generator).float() / 8
    layers = [OuterFactors(a, g, bias=True)]
    clip, bits = 100.0, 6  # no row is clipped
    factored = clipped_outer_grid_sum(layers, clip_norm=clip, bits=bits)
    reference = clipped_grid_sum(materialise(layers), clip_norm=clip, bits=bits)
    assert torch.equal(factored, reference)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_factored_sum_matches_the_materialised_one(dtype: torch.dtype) -> None:
    n = 40
    layers = random_layers(n, dtype, seed=1)
    d = dimension(layers)
    clip = 0.8  # most rows are clipped
    bits = grid_bits(clip, d)
    factored = clipped_outer_grid_sum(layers, clip_norm=clip, bits=bits)
    parts = [p.to(dtype) for p in materialise(layers)]
    reference = clipped_grid_sum(parts, clip_norm=clip, bits=bits)
    assert factored.shape == (d,)
    assert bool((factored == factored.round()).all())
    # Both paths round the same reals after float errors below one grid unit, so each row's
    # coordinate rounds to the same integer or a neighbour: |difference| <= n. In float64 the
    # errors are about 2**-30 of a unit and a coordinate almost never rounds the other way.
    difference = (factored - reference).abs()
    assert float(difference.max()) <= n
    if dtype == torch.float64:
        assert float(difference.max()) <= 1.0
        assert int((difference > 0).sum()) <= 2
    assert float(torch.linalg.vector_norm(difference)) < 1e-4 * math.ldexp(clip, bits)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_example_changes_the_sum_by_at_most_the_grid_sensitivity(dtype: torch.dtype) -> None:
    n = 12
    layers = random_layers(n, torch.float64, seed=2)
    a, g = layers[0].inputs.clone(), layers[0].output_grads.clone()
    a[0] *= 1e6  # far above the clip
    g[1] *= 1e-9  # far below
    g[2] = 0.0
    a[3] = math.inf  # not finite: contributes nothing
    g[4, 1] = math.nan
    a[5] = 0.0
    a[5, 0] = 1e3  # one input carries the whole (clipped) norm of this row
    layers[0] = OuterFactors(a, g, bias=True)
    layers = [OuterFactors(f.inputs.to(dtype), f.output_grads.to(dtype), f.bias) for f in layers]
    d = dimension(layers)
    clip = 0.7
    bits = grid_bits(clip, d)
    bound = grid_sensitivity(clip, d, bits)
    total = clipped_outer_grid_sum(layers, clip_norm=clip, bits=bits)
    for j in range(n):
        keep = [i for i in range(n) if i != j]
        others = [OuterFactors(f.inputs[keep], f.output_grads[keep], f.bias) for f in layers]
        change = total - clipped_outer_grid_sum(others, clip_norm=clip, bits=bits)
        norm = float(torch.linalg.vector_norm(change))
        assert norm <= bound
        if j in (3, 4):
            assert norm == 0.0
        if j in (0, 5):  # clipping is active: the row has norm C 2**k up to rounding
            assert norm >= math.ldexp(clip, bits) - math.sqrt(d) / 2


def test_the_clip_is_not_a_bound_without_the_rounding_term() -> None:
    # Negative control: C 2**k alone is exceeded once the row is rounded to the grid.
    a = torch.full((1, 4), 0.4375, dtype=torch.float64)  # norm 0.875 <= C = 1
    g = torch.ones(1, 1, dtype=torch.float64)
    total = clipped_outer_grid_sum([OuterFactors(a, g, bias=False)], clip_norm=1.0, bits=3)
    norm = float(torch.linalg.vector_norm(total))  # 3.5 rounds to 4 four times: norm 8 > 7
    assert norm > math.ldexp(0.875, 3)
    assert norm <= grid_sensitivity(1.0, 4, 3)


def test_rows_are_formed_in_chunks_without_changing_the_sum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layers = random_layers(30, torch.float32, seed=3)
    d = dimension(layers)
    bits = grid_bits(1.0, d)
    whole = clipped_outer_grid_sum(layers, clip_norm=1.0, bits=bits)
    monkeypatch.setattr(_factored_clipping, "_ROW_CHUNK_ELEMENTS", 50)  # 1 or 2 rows a chunk
    assert torch.equal(clipped_outer_grid_sum(layers, clip_norm=1.0, bits=bits), whole)


def test_exact_row_sum_is_exact_and_order_free() -> None:
    values = np.random.default_rng(4).integers(-(2**22), 2**22, size=(1000, 9))  # fixture
    rows = torch.tensor(values, dtype=torch.float32)  # integers below 2**23 are exact
    expected = values.sum(axis=0).astype(np.float64)
    assert exact_row_sum(rows).tolist() == expected.tolist()
    assert exact_row_sum(rows.flip(0)).tolist() == expected.tolist()
    assert exact_row_sum(rows.double()).tolist() == expected.tolist()
    # Negative control: float32 summation of the same rows is not exact.
    assert rows.sum(dim=0).double().tolist() != expected.tolist()


def test_bad_factors_raise_naming_the_argument() -> None:
    good = OuterFactors(torch.ones(3, 2), torch.ones(3, 1), bias=True)
    bad_lists: list[list[OuterFactors]] = [
        [],
        [OuterFactors(torch.ones(3, 2), torch.ones(2, 1), bias=True)],
        [good, OuterFactors(torch.ones(4, 2), torch.ones(4, 1), bias=True)],
        [OuterFactors(torch.ones(3, 2, 2), torch.ones(3, 1), bias=True)],
    ]
    for layers in bad_lists:
        with pytest.raises(InvalidParameterError) as info:
            clipped_outer_grid_sum(layers, clip_norm=1.0, bits=4)
        assert info.value.name == "layers"
    with pytest.raises(InvalidParameterError, match="too many"):
        clipped_outer_grid_sum([good], clip_norm=1.0, bits=52)
    with pytest.raises(InvalidParameterError, match="clip_norm"):
        clipped_outer_grid_sum([good], clip_norm=0.0, bits=4)
