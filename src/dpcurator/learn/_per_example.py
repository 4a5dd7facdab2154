"""The clipped grid sum of a lot's per-example gradients: a generic and a fast engine.

DP-SGD needs, for each lot, ``S = sum_i round(2**k clip_C(grad_i))`` (grid units; see
:mod:`dpcurator.learn._torch_noise`). Two engines compute it, with the same sensitivity
(:func:`~dpcurator.learn._torch_noise.grid_sensitivity`):

``"functorch"`` (:class:`FunctorchGradientSum`, any model)
    ``vmap(grad(loss))`` over the examples (``torch.func``), each example run through the model
    as a batch of one, the gradients materialised, then
    :func:`~dpcurator.learn._torch_noise.clipped_grid_sum`.
``"linear-stack"`` (:class:`LinearStackGradientSum`)
    For an ``nn.Sequential`` (nested ones allowed) of ``nn.Linear`` layers and parameter-free
    modules that act on each example's row separately (elementwise activations, dropout,
    identity): one batched forward pass records each linear layer's input ``a``, the
    per-example loss gradients at the output come from ``vmap(grad(loss))`` on the output
    only (or, for the common losses in :data:`SEPARABLE_LOSSES`, from their
    ``reduction="none"`` form), and one backward pass gives each layer's output gradient
    ``g``; the per-example
    gradients are the outer products ``g a^T`` (Goodfellow 2015), clipped and summed from
    their factors by :func:`~dpcurator.learn._factored_clipping.clipped_outer_grid_sum`. The
    module types are checked exactly (a subclass of ``nn.Linear`` may compute something else),
    and modules with hooks are refused, so that the batched pass computes each example's row
    from that example alone.

:func:`make_gradient_sum` picks ``"linear-stack"`` where it applies (``engine="auto"``), and the
linear-stack engine falls back to ``functorch`` for inputs that are not ``(n, features)``.

Examples
--------
>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
>>> fast = make_gradient_sum(model, torch.nn.functional.cross_entropy, clip_norm=1.0, bits=12)
>>> slow = make_gradient_sum(model, torch.nn.functional.cross_entropy, clip_norm=1.0, bits=12,
...                          engine="functorch")
>>> fast.name, slow.name
('linear-stack', 'functorch')
>>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
>>> bool((fast(X, y) - slow(X, y)).abs().max() <= 16)  # equal up to float rounding
True
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.nn import functional

from dpcurator._validation import check_integer, check_positive
from dpcurator.errors import InvalidParameterError
from dpcurator.learn._factored_clipping import OuterFactors, clipped_outer_grid_sum
from dpcurator.learn._torch_noise import clipped_grid_sum

__all__ = [
    "GRADIENT_ENGINES",
    "ROW_WISE_MODULES",
    "SEPARABLE_LOSSES",
    "FunctorchGradientSum",
    "LinearStackGradientSum",
    "LotGradientSum",
    "linear_stack",
    "make_gradient_sum",
]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

SEPARABLE_LOSSES: tuple[Callable[..., torch.Tensor], ...] = (
    functional.cross_entropy,
    functional.nll_loss,
    functional.binary_cross_entropy,
    functional.binary_cross_entropy_with_logits,
    functional.mse_loss,
    functional.l1_loss,
    functional.smooth_l1_loss,
    functional.huber_loss,
)
"""Losses whose ``reduction="none"`` gives each example's loss on its own (see
:class:`LinearStackGradientSum`)."""

GRADIENT_ENGINES = ("auto", "functorch", "linear-stack")
"""Choices of :func:`make_gradient_sum`'s ``engine``."""

ROW_WISE_MODULES: tuple[type[nn.Module], ...] = (
    nn.Identity,
    nn.Dropout,
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.ELU,
    nn.SELU,
    nn.CELU,
    nn.GELU,
    nn.SiLU,
    nn.Mish,
    nn.Tanh,
    nn.Sigmoid,
    nn.Hardtanh,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.Softplus,
    nn.Softsign,
    nn.Tanhshrink,
    nn.LogSigmoid,
)
"""Parameter-free modules that act on each element (so on each example's row) separately."""


class LotGradientSum(ABC):
    """``S = sum_i round(2**k clip_C(grad_i))`` for a lot, at the model's current parameters.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its trainable parameters, in ``named_parameters`` order, lay out ``S``.
    loss_fn : callable
        ``loss_fn(output, target)`` for a batch of one example.
    clip_norm : float
        ``C`` > 0.
    bits : int
        The grid exponent ``k``.
    """

    name: str = ""
    """The engine's name (one of :data:`GRADIENT_ENGINES` but ``"auto"``)."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, *, clip_norm: float, bits: int) -> None:
        self.model = model
        self.loss_fn = loss_fn
        self.clip_norm = check_positive(clip_norm, "clip_norm")
        self.bits = check_integer(bits, "bits")
        self.names = [name for name, p in model.named_parameters() if p.requires_grad]
        self.params = [p for _, p in model.named_parameters() if p.requires_grad]
        self.dimension = sum(p.numel() for p in self.params)

    def __call__(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Return ``S`` for the lot ``(x, target)``: float64, shape ``(d,)``, integer-valued."""
        if int(x.shape[0]) == 0:
            return torch.zeros(self.dimension, dtype=torch.float64)
        return self._grid_sum(x, target)

    @abstractmethod
    def _grid_sum(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Return ``S`` for a non-empty lot."""

    def _loss_of_one(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Return the loss of one example (unbatched ``output`` and ``target``)."""
        return self.loss_fn(output.unsqueeze(0), target.unsqueeze(0))


class FunctorchGradientSum(LotGradientSum):
    """Per-example gradients with ``torch.func`` (any model), clipped and summed on the grid.

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Conv1d(1, 2, kernel_size=2)
    >>> engine = FunctorchGradientSum(model, torch.nn.functional.cross_entropy,
    ...                               clip_norm=1.0, bits=10)
    >>> engine(torch.randn(5, 1, 3), torch.zeros(5, 2, dtype=torch.long)).shape
    torch.Size([6])
    """

    name = "functorch"

    def __init__(self, model: nn.Module, loss_fn: LossFn, *, clip_norm: float, bits: int) -> None:
        super().__init__(model, loss_fn, clip_norm=clip_norm, bits=bits)

        def loss_one(
            params: dict[str, torch.Tensor],
            buffers: dict[str, torch.Tensor],
            x: torch.Tensor,
            target: torch.Tensor,
        ) -> torch.Tensor:
            output = functional_call(model, (params, buffers), (x.unsqueeze(0),))
            return self.loss_fn(output, target.unsqueeze(0))

        self._per_example: Callable[..., dict[str, torch.Tensor]] = vmap(
            grad(loss_one), in_dims=(None, None, 0, 0), randomness="different"
        )

    def _grid_sum(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        params = {name: p.detach() for name, p in zip(self.names, self.params, strict=True)}
        buffers = {name: b.detach() for name, b in self.model.named_buffers()}
        grads = self._per_example(params, buffers, x, target)
        return clipped_grid_sum(
            [grads[name] for name in self.names],
            clip_norm=self.clip_norm,
            bits=self.bits,
            overwrite=True,
        )


class LinearStackGradientSum(LotGradientSum):
    """Per-example gradients of a linear stack as outer products, clipped from their factors.

    The loss gradient at each example's output row comes from ``vmap(grad(loss))`` on the
    outputs, or, for a loss in :data:`SEPARABLE_LOSSES` that gives one value per example with
    ``reduction="none"`` (e.g. ``cross_entropy`` on ``(n, classes)`` logits), from one backward
    pass of the sum of those values: a batch of one with the default ``"mean"`` reduction
    computes the same value, so the per-example gradients are the same.

    Parameters
    ----------
    model : torch.nn.Sequential
        A linear stack (see :func:`linear_stack`).
    loss_fn, clip_norm, bits
        As for :class:`LotGradientSum`.

    Raises
    ------
    InvalidParameterError
        If ``model`` is not a linear stack.

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    >>> engine = LinearStackGradientSum(model, torch.nn.functional.cross_entropy,
    ...                                 clip_norm=1.0, bits=10)
    >>> engine(torch.randn(5, 2), torch.zeros(5, dtype=torch.long)).shape
    torch.Size([17])
    """

    name = "linear-stack"

    def __init__(self, model: nn.Module, loss_fn: LossFn, *, clip_norm: float, bits: int) -> None:
        super().__init__(model, loss_fn, clip_norm=clip_norm, bits=bits)
        modules = linear_stack(model)
        if modules is None:
            raise InvalidParameterError(
                "model",
                type(model).__name__,
                "must be an nn.Sequential of nn.Linear layers and row-wise activations",
            )
        self._modules = modules
        self._per_example_output_grads: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = vmap(
            grad(self._loss_of_one)
        )
        self._fallback = FunctorchGradientSum(model, loss_fn, clip_norm=clip_norm, bits=bits)

    def _output_grads(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Return each example's loss gradient with respect to its output row."""
        if self.loss_fn in SEPARABLE_LOSSES:
            loss_fn: Callable[..., torch.Tensor] = self.loss_fn
            leaf = output.requires_grad_()
            losses = loss_fn(leaf, target, reduction="none")
            if losses.numel() == output.shape[0]:  # one loss per example
                (grads,) = torch.autograd.grad(losses.sum(), leaf)
                return grads
        return self._per_example_output_grads(output.detach(), target)

    def _grid_sum(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2:  # a linear layer over more axes sums outer products: not one factor
            return self._fallback(x, target)
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        biases: list[bool] = []
        with torch.enable_grad():
            h = x
            for module in self._modules:
                if isinstance(module, nn.Linear):
                    inputs.append(h.detach())
                    h = module(h)
                    outputs.append(h)
                    biases.append(module.bias is not None)
                else:
                    h = module(h)
            output_grads = self._output_grads(h.detach(), target)
            layer_grads = torch.autograd.grad(h, outputs, grad_outputs=output_grads)
        layers = [
            OuterFactors(a, g, bias) for a, g, bias in zip(inputs, layer_grads, biases, strict=True)
        ]
        return clipped_outer_grid_sum(layers, clip_norm=self.clip_norm, bits=self.bits)


def linear_stack(model: nn.Module) -> list[nn.Module] | None:
    """Return the modules of ``model`` in call order if it is a linear stack, else ``None``.

    A linear stack is an ``nn.Linear``, or an ``nn.Sequential`` (nested ones are flattened)
    whose modules are exactly ``nn.Linear`` (weight trainable, bias absent or trainable), one of
    :data:`ROW_WISE_MODULES`, or ``nn.Softmax`` / ``nn.LogSoftmax`` over the feature axis
    (``dim`` 1 or -1), each used once and without forward hooks, whose trainable parameters
    are exactly those of its linear layers. Such a model maps each example's row
    on its own, so a batched pass gives every example's output and gradient as if it were
    alone.

    Examples
    --------
    >>> from torch import nn
    >>> len(linear_stack(nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))))
    3
    >>> linear_stack(nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2))) is None
    True
    """
    modules: list[nn.Module] = []
    stack = [model]
    while stack:
        module = stack.pop()
        if type(module) is nn.Sequential:
            stack.extend(list(module)[::-1])  # what forward calls, repeats included
            continue
        if module._forward_hooks or module._forward_pre_hooks:
            return None
        if type(module) is nn.Linear:
            if not module.weight.requires_grad:
                return None
            if module.bias is not None and not module.bias.requires_grad:
                return None
        elif not _is_row_wise(module):
            return None
        modules.append(module)
    if len({id(m) for m in modules}) != len(modules):
        return None  # a module called twice: its gradient is a sum of outer products
    linear_params = {id(p) for m in modules if isinstance(m, nn.Linear) for p in m.parameters()}
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable or {id(p) for p in trainable} != linear_params:
        return None
    return modules


def _is_row_wise(module: nn.Module) -> bool:
    """Whether ``module`` maps each row of an ``(n, features)`` batch on its own."""
    if type(module) in ROW_WISE_MODULES:
        return True
    softmax = type(module) in (nn.Softmax, nn.LogSoftmax)
    return softmax and getattr(module, "dim", None) in (1, -1)  # over features, not examples


def make_gradient_sum(
    model: nn.Module,
    loss_fn: LossFn,
    *,
    clip_norm: float,
    bits: int,
    engine: str = "auto",
) -> LotGradientSum:
    """Return the engine that computes a lot's clipped grid sum for ``model``.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    loss_fn : callable
        ``loss_fn(output, target)`` for a batch of one example.
    clip_norm : float
        ``C`` > 0.
    bits : int
        The grid exponent ``k``.
    engine : {"auto", "functorch", "linear-stack"}, default "auto"
        ``"auto"``: the linear-stack engine if ``model`` is a linear stack
        (:func:`linear_stack`), ``functorch`` otherwise.

    Returns
    -------
    LotGradientSum

    Raises
    ------
    InvalidParameterError
        If ``engine`` is unknown, or ``"linear-stack"`` for a model that is not one.

    Examples
    --------
    >>> import torch
    >>> layered = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    >>> make_gradient_sum(layered, torch.nn.functional.cross_entropy, clip_norm=1.0, bits=8).name
    'functorch'
    """
    if engine not in GRADIENT_ENGINES:
        raise InvalidParameterError("engine", engine, f"must be one of {GRADIENT_ENGINES}")
    if engine == "functorch" or (engine == "auto" and linear_stack(model) is None):
        return FunctorchGradientSum(model, loss_fn, clip_norm=clip_norm, bits=bits)
    return LinearStackGradientSum(model, loss_fn, clip_norm=clip_norm, bits=bits)
