"""Per-example gradient engines: which models take the fast path, and that both engines agree."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from dpcurator.errors import InvalidParameterError  # noqa: E402
from dpcurator.learn._per_example import (  # noqa: E402
    FunctorchGradientSum,
    LinearStackGradientSum,
    linear_stack,
    make_gradient_sum,
)
from dpcurator.learn._torch_noise import grid_bits, grid_sensitivity  # noqa: E402

F = torch.nn.functional
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class Doubling(nn.Linear):
    """A subclass of nn.Linear that computes something else: not a linear stack."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2.0 * super().forward(x)


def engines(model: nn.Module, loss: Loss, clip: float = 0.5) -> tuple[object, object, int]:
    d = sum(p.numel() for p in model.parameters() if p.requires_grad)
    bits = grid_bits(clip, d)
    fast = make_gradient_sum(model, loss, clip_norm=clip, bits=bits, engine="linear-stack")
    slow = make_gradient_sum(model, loss, clip_norm=clip, bits=bits, engine="functorch")
    return fast, slow, d


def assert_same_sums(fast: object, slow: object, x: torch.Tensor, y: torch.Tensor) -> None:
    """Equal up to rounding flips: each row's coordinate by at most one grid unit."""
    assert callable(fast) and callable(slow)
    a, b = fast(x, y), slow(x, y)
    difference = (a - b).abs()
    assert float(difference.max()) <= x.shape[0]
    assert float(torch.linalg.vector_norm(difference)) <= 1e-4 * float(torch.linalg.vector_norm(b))


# -- which models are linear stacks ---------------------------------------------------------
def test_linear_stacks_are_recognised() -> None:
    mlp = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    modules = linear_stack(mlp)
    assert modules is not None
    assert [type(m) for m in modules] == [nn.Linear, nn.Tanh, nn.ReLU, nn.Linear]
    assert linear_stack(nn.Linear(3, 2)) is not None
    assert linear_stack(nn.Sequential(nn.Linear(3, 2, bias=False), nn.Dropout(0.1))) is not None
    assert linear_stack(nn.Sequential(nn.Linear(3, 2), nn.LogSoftmax(dim=1))) is not None


def make_hooked() -> nn.Module:
    layer = nn.Linear(2, 2)
    layer.register_forward_hook(lambda module, args, output: output * 2)
    return nn.Sequential(layer)


def make_frozen() -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
    model[0].weight.requires_grad_(False)
    return model


def make_shared() -> nn.Module:
    layer = nn.Linear(2, 2)
    return nn.Sequential(layer, nn.Tanh(), layer)


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2)),  # normalises within a row
        lambda: nn.Sequential(nn.Linear(2, 2), nn.PReLU()),  # parameters outside a Linear
        lambda: nn.Sequential(Doubling(2, 2)),  # a subclass may compute anything
        lambda: nn.Sequential(nn.Linear(2, 2), nn.Softmax(dim=0)),  # mixes examples
        lambda: nn.Conv1d(1, 1, 2),
        make_hooked,
        make_frozen,
        make_shared,
    ],
)
def test_other_models_are_not_linear_stacks(make: Callable[[], nn.Module]) -> None:
    model = make()
    assert linear_stack(model) is None
    engine = make_gradient_sum(model, F.cross_entropy, clip_norm=1.0, bits=8)
    assert isinstance(engine, FunctorchGradientSum)
    with pytest.raises(InvalidParameterError) as info:
        make_gradient_sum(model, F.cross_entropy, clip_norm=1.0, bits=8, engine="linear-stack")
    assert info.value.name == "model"


def test_auto_picks_the_linear_stack_engine() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))
    engine = make_gradient_sum(model, F.cross_entropy, clip_norm=1.0, bits=8)
    assert isinstance(engine, LinearStackGradientSum)
    assert engine.name == "linear-stack"
    with pytest.raises(InvalidParameterError) as info:
        make_gradient_sum(model, F.cross_entropy, clip_norm=1.0, bits=8, engine="opacus")
    assert info.value.name == "engine"


# -- both engines compute the same sums -----------------------------------------------------
def per_example_mean_ce(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy through a wrapper: not a known separable loss, so vmap computes it."""
    return F.cross_entropy(output, target)


@pytest.mark.parametrize("loss", [F.cross_entropy, per_example_mean_ce, F.nll_loss])
@pytest.mark.parametrize("activation", [nn.ReLU, nn.Tanh, nn.GELU])
def test_engines_agree_on_classification(loss: Loss, activation: type[nn.Module]) -> None:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(6, 8), activation(), nn.Linear(8, 4)]
    if loss is F.nll_loss:
        layers.append(nn.LogSoftmax(dim=-1))
    model = nn.Sequential(*layers)
    assert linear_stack(model) is not None
    fast, slow, _ = engines(model, loss)
    x = torch.randn(32, 6)
    x[0] *= 100.0  # a clipped outlier
    y = torch.randint(0, 4, (32,))
    assert_same_sums(fast, slow, x, y)


def test_engines_agree_on_regression_with_several_outputs() -> None:
    # mse_loss with 3 outputs gives 3 values per example with reduction="none": vmap path.
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 6), nn.SiLU(), nn.Linear(6, 3, bias=False))
    fast, slow, _ = engines(model, F.mse_loss, clip=2.0)
    x, y = torch.randn(20, 5), torch.randn(20, 3)
    assert_same_sums(fast, slow, x, y)


def test_inputs_with_extra_axes_fall_back_to_functorch() -> None:
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    fast, slow, _ = engines(model, F.mse_loss)
    x, y = torch.randn(10, 5, 3), torch.randn(10, 5, 2)  # a Linear over a sequence axis
    assert callable(fast) and callable(slow)
    assert torch.equal(fast(x, y), slow(x, y))


def test_an_empty_lot_sums_to_zero() -> None:
    model = nn.Sequential(nn.Linear(3, 2))
    fast, slow, d = engines(model, F.cross_entropy)
    assert callable(fast) and callable(slow)
    for engine in (fast, slow):
        total = engine(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))
        assert torch.equal(total, torch.zeros(d, dtype=torch.float64))


@pytest.mark.parametrize("engine", ["linear-stack", "functorch"])
def test_one_example_moves_the_sum_by_at_most_the_sensitivity(engine: str) -> None:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    d = sum(p.numel() for p in model.parameters())
    clip = 0.25
    bits = grid_bits(clip, d)
    total_of = make_gradient_sum(model, F.cross_entropy, clip_norm=clip, bits=bits, engine=engine)
    x, y = torch.randn(10, 4), torch.randint(0, 3, (10,))
    x[3] *= 1000.0  # an outlier with a huge gradient
    x[5] = math.nan  # a row that is not finite contributes nothing
    full = total_of(x, y)
    for j in range(10):
        keep = torch.tensor([i for i in range(10) if i != j])
        change = full - total_of(x[keep], y[keep])
        norm = float(torch.linalg.vector_norm(change))
        assert norm <= grid_sensitivity(clip, d, bits)
        if j == 5:
            assert norm == 0.0
