"""DP-SGD for PyTorch: noise level, clipping, accounting, learning, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpcurator.accounting import (  # noqa: E402
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RDPAccountant,
    SelfComposedEvent,
    dpsgd_noise_multiplier,
)
from dpcurator.errors import (  # noqa: E402
    BudgetExceededError,
    InvalidParameterError,
    UnsupportedError,
)
from dpcurator.learn import _dpsgd  # noqa: E402
from dpcurator.learn._dpsgd import DPSGD, poisson_lots, step_noise  # noqa: E402
from dpcurator.learn._torch_noise import (  # noqa: E402
    TensorNoise,
    clipped_grid_sum,
    grid_bits,
    grid_sensitivity,
)
from dpcurator.noise import InsecureSeededSource  # noqa: E402
from tests.learn.conftest import zero_loss  # noqa: E402

F = torch.nn.functional


def make_trainer(model: torch.nn.Module, **kwargs: object) -> DPSGD:
    options: dict[str, object] = {
        "loss_fn": F.cross_entropy,
        "max_grad_norm": 1.0,
        "batch_size": 20,
        "noise_multiplier": 1.0,
        "source": InsecureSeededSource(0),
        "progress": False,
    }
    options.update(kwargs)
    optimizer = options.pop("optimizer", None) or torch.optim.SGD(model.parameters(), lr=0.1)
    return DPSGD(model, optimizer, **options)  # type: ignore[arg-type]


def noise_std_check(samples: np.ndarray, sigma: float) -> bool:
    """Whether ``samples`` look like N(0, sigma^2): std within 5 standard errors, mean too.

    For n normal samples the sample standard deviation has standard error ``sigma /
    sqrt(2 n)`` and the mean ``sigma / sqrt(n)`` (large-n normal theory); 5 standard errors
    make a false alarm about a 1-in-a-million event.
    """
    n = samples.size
    std_ok = abs(samples.std() / sigma - 1.0) < 5.0 / math.sqrt(2.0 * n)
    mean_ok = abs(samples.mean()) < 5.0 * sigma / math.sqrt(n)
    return bool(std_ok and mean_ok)


# -- noise -----------------------------------------------------------------------------------
@pytest.mark.statistical
@pytest.mark.parametrize(
    ("noise", "engine"),
    [("secure", "linear-stack"), ("float", "linear-stack"), ("secure", "functorch")],
)
def test_noise_on_zeroed_gradients_matches_sigma_c(noise: str, engine: str) -> None:
    # Opacus' "zero the signal, measure the noise" test: with zero gradients, SGD with lr = 1
    # moves each parameter by -(noise in grid units) 2**-k / L per step.
    torch.manual_seed(0)
    model = torch.nn.Linear(200, 50)  # 10,050 parameters
    clip, z, lot = 0.5, 1.3, 50
    trainer = make_trainer(
        model,
        loss_fn=zero_loss,
        max_grad_norm=clip,
        batch_size=lot,
        noise_multiplier=z,
        noise=noise,
        engine=engine,
        optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
        source=InsecureSeededSource(7),
    )
    assert trainer.engine_ == engine
    X = torch.randn(100, 200)
    y = torch.zeros(100, dtype=torch.long)
    before = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    trainer.fit(X, y)  # one epoch: 2 steps
    after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    moved = (after - before).double().numpy()
    assert trainer.steps_ == 2
    # Per coordinate: 2 independent steps of standard deviation sigma C / L (float32 params add
    # a relative 2**-24, far below the statistical tolerance).
    sigma_c = z * clip
    per_step = trainer.sigma_ * 2.0**-trainer.grid_bits_ / lot
    assert per_step == pytest.approx(sigma_c / lot, rel=1e-4)  # the grid costs < 2**-16
    assert per_step >= sigma_c / lot
    samples = moved / math.sqrt(2.0)  # the sum of 2 steps has std sqrt(2) per_step
    assert noise_std_check(samples, per_step)
    # Negative controls: a noise 10% too small or too large is detected.
    assert not noise_std_check(samples, per_step * 1.1)
    assert not noise_std_check(samples, per_step / 1.1)


@pytest.mark.statistical
def test_secure_noise_stays_on_the_integer_grid_and_float_noise_does_not() -> None:
    secure = TensorNoise("secure", source=InsecureSeededSource(1)).sample(2.0**20, 5000)
    assert bool((secure == secure.round()).all())
    assert noise_std_check(secure.numpy(), 2.0**20)
    noisy = TensorNoise("float", source=InsecureSeededSource(1)).sample(2.0**20, 5000)
    assert not bool((noisy == noisy.round()).all())  # floats: off the grid (Jin et al. 2022)
    assert noise_std_check(noisy.numpy(), 2.0**20)


@pytest.mark.statistical
def test_noise_drawn_ahead_for_several_steps_has_the_same_law() -> None:
    # Blocks of 1 step and of many steps: each vector is N_Z(0, sigma^2) per coordinate.
    sigma, d, steps = 50.0, 7, 300
    for coordinates in (1, 2**14):
        noise = TensorNoise("secure", source=InsecureSeededSource(coordinates))
        draws = list(step_noise(noise, sigma, d, steps, coordinates=coordinates))
        assert len(draws) == steps and all(v.shape == (d,) for v in draws)
        samples = torch.stack(draws).numpy()
        assert noise_std_check(samples, sigma)
        assert not noise_std_check(samples, sigma * 1.1)  # negative control
        # Steps are independent: the correlation of consecutive steps is within 5 / sqrt(N).
        corr = np.corrcoef(samples[:-1].ravel(), samples[1:].ravel())[0, 1]
        assert abs(corr) < 5.0 / math.sqrt(samples[1:].size)


def test_float_noise_is_reproducible_from_the_source_only() -> None:
    a = TensorNoise("float", source=InsecureSeededSource(3)).sample(1.0, 10)
    torch.manual_seed(123)  # torch's global generator plays no part
    b = TensorNoise("float", source=InsecureSeededSource(3)).sample(1.0, 10)
    c = TensorNoise("float", source=InsecureSeededSource(4)).sample(1.0, 10)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


# -- clipping and the grid -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_row_contribution_is_bounded_by_the_grid_sensitivity(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(5)
    d, clip = 300, 0.7
    rows = torch.randn(12, d, generator=generator, dtype=torch.float64)
    rows[0] *= 1e6  # far above the clip
    rows[1] *= 1e-9  # far below
    rows[2] = 0.0
    rows[3] = clip / math.sqrt(d)  # exactly at the clip, every coordinate equal
    rows[4, 7] = math.inf  # not finite: contributes nothing
    rows[5, 9] = math.nan
    rows = rows.to(dtype)
    bits = grid_bits(clip, d)
    bound = grid_sensitivity(clip, d, bits)
    total = clipped_grid_sum(rows, clip_norm=clip, bits=bits)
    assert bool((total == total.round()).all())  # exact integer sums
    for j in range(rows.shape[0]):
        others = torch.cat([rows[:j], rows[j + 1 :]])
        change = total - clipped_grid_sum(others, clip_norm=clip, bits=bits)
        norm = float(torch.linalg.vector_norm(change))
        assert norm <= bound
        if j in (4, 5):
            assert norm == 0.0
        if j == 0:  # clipping is active: the row has norm C 2**k up to rounding
            assert norm >= math.ldexp(clip, bits) - math.sqrt(d) / 2


def test_rounding_can_exceed_the_clip_so_the_bound_needs_its_rounding_term() -> None:
    # Negative control for the sensitivity: C 2**k alone is not a valid bound.
    d, clip, bits = 4, 1.0, 3
    row = torch.full((1, d), 0.4375, dtype=torch.float64)  # norm 0.875 <= C; 2**3 * 0.4375 = 3.5
    rounded = clipped_grid_sum(row, clip_norm=clip, bits=bits)
    norm = float(torch.linalg.vector_norm(rounded))  # rounds to (4, 4, 4, 4): norm 8 > 7
    assert norm > math.ldexp(0.875, bits)
    assert norm <= grid_sensitivity(clip, d, bits)


def test_grid_rounding_costs_little_sensitivity() -> None:
    for d in (1, 10, 4810, 10**6):
        bits = grid_bits(1.0, d)
        assert 1.0 <= grid_sensitivity(1.0, d, bits) / math.ldexp(1.0, bits) < 1 + 2.0**-10


def test_dpsgd_bounds_one_example_of_the_lot() -> None:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    trainer = make_trainer(model, max_grad_norm=0.25)
    X = torch.randn(10, 4)
    y = torch.randint(0, 3, (10,))
    X[3] *= 1000.0  # an outlier with a huge gradient
    full = trainer._gradient_sum(X, y)
    for j in range(10):
        keep = torch.tensor([i for i in range(10) if i != j])
        change = full - trainer._gradient_sum(X[keep], y[keep])
        assert float(torch.linalg.vector_norm(change)) <= trainer.sensitivity_


# -- accounting ------------------------------------------------------------------------------
@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_epsilon_equals_the_accounting_layer(accountant: str) -> None:
    model = torch.nn.Linear(3, 2)
    trainer = make_trainer(
        model, batch_size=10, epochs=3, noise_multiplier=0.9, accountant=accountant
    )
    trainer.fit(torch.randn(80, 3), torch.randint(0, 2, (80,)))
    assert trainer.steps_ == 24
    q = 10 / 80
    reference = PLDAccountant() if accountant == "pld" else RDPAccountant()
    expected = reference.compose(PoissonSampledEvent(q, GaussianEvent(sigma=0.9)), 24).get_epsilon(
        1e-5
    )
    assert trainer.epsilon_ == pytest.approx(expected, rel=1e-6)
    assert trainer.epsilon(1e-3) < trainer.epsilon_
    event = trainer.privacy_event_
    assert isinstance(event, SelfComposedEvent) and event.count == 24
    assert isinstance(event.event, PoissonSampledEvent)
    assert event.event.sampling_rate == q
    assert isinstance(event.event.event, GaussianEvent)
    assert event.event.event.noise_multiplier >= 0.9


def test_epsilon_of_several_fits_equals_the_accounting_layer() -> None:
    model = torch.nn.Linear(3, 2)
    trainer = make_trainer(model, batch_size=10, epochs=1, noise_multiplier=1.1)
    trainer.fit(torch.randn(40, 3), torch.randint(0, 2, (40,)))  # q = 1/4, 4 steps
    trainer.fit(torch.randn(80, 3), torch.randint(0, 2, (80,)))  # q = 1/8, 8 steps
    assert [(ph.sampling_rate, ph.steps) for ph in trainer.phases_] == [(0.25, 4), (0.125, 8)]
    reference = PLDAccountant()
    for phase in trainer.phases_:
        reference.compose(phase.event, phase.steps)
    assert trainer.epsilon_ == pytest.approx(reference.get_epsilon(1e-5), rel=1e-9)
    event = trainer.privacy_event_
    assert PLDAccountant().compose(event).get_epsilon(1e-5) == pytest.approx(
        trainer.epsilon_, rel=1e-9
    )


def test_pld_reports_a_smaller_epsilon_than_rdp_for_the_same_run() -> None:
    runs = {}
    for accountant in ("pld", "rdp"):
        model = torch.nn.Linear(3, 2)
        trainer = make_trainer(model, batch_size=8, epochs=4, accountant=accountant)
        runs[accountant] = trainer.fit(torch.randn(64, 3), torch.randint(0, 2, (64,))).epsilon_
    assert runs["pld"] < runs["rdp"]


def test_target_epsilon_calibrates_the_noise_multiplier() -> None:
    model = torch.nn.Linear(3, 2)
    trainer = make_trainer(
        model, batch_size=16, epochs=5, noise_multiplier=None, target_epsilon=2.0
    )
    trainer.fit(torch.randn(128, 3), torch.randint(0, 2, (128,)))
    expected = dpsgd_noise_multiplier(2.0, 1e-5, sampling_rate=16 / 128, steps=40)
    assert trainer.noise_multiplier_ == expected
    assert 1.9 < trainer.epsilon_ <= 2.0


def test_a_fit_beyond_the_target_is_refused_before_anything_is_spent() -> None:
    model = torch.nn.Linear(3, 2)
    trainer = make_trainer(
        model, batch_size=16, epochs=2, noise_multiplier=None, target_epsilon=1.0
    )
    X, y = torch.randn(64, 3), torch.randint(0, 2, (64,))
    trainer.fit(X, y)
    steps, spent = trainer.steps_, trainer.epsilon_
    weights = model.weight.detach().clone()
    with pytest.raises(BudgetExceededError, match="target_epsilon"):
        trainer.fit(X, y)
    assert trainer.steps_ == steps
    assert trainer.epsilon_ == spent
    assert torch.equal(model.weight, weights)


# -- sampling and reproducibility ------------------------------------------------------------
@pytest.mark.statistical
@pytest.mark.parametrize("decisions", [1, 2**22])
def test_poisson_lots_have_binomial_sizes(decisions: int) -> None:
    # Lot sizes are Binomial(n, q) whatever the blocking: the mean of S sizes is within 5
    # standard errors sqrt(n q (1 - q) / S) of n q; every example is as likely to be chosen.
    n, q, steps = 200, 0.1, 500
    lots = list(poisson_lots(q, n, steps, source=InsecureSeededSource(3), decisions=decisions))
    sizes = np.array([len(lot) for lot in lots])
    standard_error = math.sqrt(n * q * (1 - q) / steps)
    assert len(lots) == steps
    assert abs(sizes.mean() - n * q) < 5 * standard_error
    assert abs(sizes.mean() - n * 0.11) > 5 * standard_error  # negative control: q = 0.11
    counts = np.bincount(torch.cat(lots).numpy(), minlength=n)  # Binomial(S, q) per example
    chi2 = float(((counts - steps * q) ** 2 / (steps * q * (1 - q))).sum())
    assert chi2 < n + 5 * math.sqrt(2 * n)  # chi-square with n degrees of freedom, 5 sd


def test_sampling_and_noise_come_from_the_source_not_torch() -> None:
    def run(seed: int, torch_seed: int) -> torch.Tensor:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        trainer = make_trainer(model, batch_size=8, epochs=2, source=InsecureSeededSource(seed))
        torch.manual_seed(torch_seed)
        X = torch.linspace(-1, 1, 160).reshape(40, 4)
        trainer.fit(X, (X[:, 0] > 0).long())
        return model.weight.detach().clone()

    assert torch.equal(run(1, 10), run(1, 20))
    assert not torch.equal(run(1, 10), run(2, 10))


# -- learning --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))  # fixture split, not privacy noise
    X = torch.tensor(X[order] / 16.0, dtype=torch.float32)
    y = torch.tensor(y[order])
    return X[:1400], y[:1400], X[1400:], y[1400:]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_on_digits_learns(
    digits: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], optimizer: str
) -> None:
    X, y, X_test, y_test = digits
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    opt = (
        torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.5)
        if optimizer == "sgd"
        else torch.optim.Adam(model.parameters(), lr=0.01)
    )
    chance = float((model(X_test).argmax(1) == y_test).float().mean())
    trainer = make_trainer(
        model,
        optimizer=opt,
        batch_size=200,
        epochs=8,
        noise_multiplier=None,
        target_epsilon=8.0,
        source=InsecureSeededSource(11),
    )
    trainer.fit(X, y)
    accuracy = float((model(X_test).argmax(1) == y_test).float().mean())
    assert chance < 0.3
    assert accuracy > 0.8
    assert trainer.epsilon_ <= 8.0


def test_both_engines_train_the_same_model() -> None:
    def run(engine: str, seed: int) -> torch.Tensor:
        torch.manual_seed(4)
        model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
        trainer = make_trainer(
            model, batch_size=16, epochs=2, engine=engine, source=InsecureSeededSource(seed)
        )
        assert trainer.engine_ == engine
        generator = torch.Generator().manual_seed(5)
        X = torch.randn(64, 5, generator=generator)
        trainer.fit(X, (X[:, 0] > 0).long() + (X[:, 1] > 0).long())
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    # Same source, same draws: the runs differ only where a rounding flips (2**-k C).
    fast = run("linear-stack", 0)
    assert torch.allclose(fast, run("functorch", 0), atol=1e-4)
    assert not torch.allclose(fast, run("linear-stack", 1), atol=1e-4)  # negative control


def test_progress_bar_refreshes_epsilon_within_its_accounting_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    computed: list[int] = []
    epsilon_of = DPSGD._epsilon_of

    def counting(self: DPSGD, phases: list[tuple[object, int]], delta: float) -> float:
        computed.append(sum(count for _, count in phases))
        return epsilon_of(self, phases, delta)  # type: ignore[arg-type]

    monkeypatch.setattr(DPSGD, "_epsilon_of", counting)
    monkeypatch.setattr(_dpsgd, "_BAR_ACCOUNTING_SHARE", 0.0)  # accounting is never cheap
    trainer = make_trainer(torch.nn.Linear(2, 2), batch_size=5, epochs=4, progress=True)
    trainer.fit(torch.randn(20, 2), torch.randint(0, 2, (20,)))
    assert computed == [4, 16]  # after the first epoch, then only after the last
    monkeypatch.setattr(_dpsgd, "_BAR_ACCOUNTING_SHARE", math.inf)
    computed.clear()
    make_trainer(torch.nn.Linear(2, 2), batch_size=5, epochs=4, progress=True).fit(
        torch.randn(20, 2), torch.randint(0, 2, (20,))
    )
    assert computed == [4, 8, 12, 16]


def test_progress_bar_shows_epsilon(capsys: pytest.CaptureFixture[str]) -> None:
    model = torch.nn.Linear(2, 2)
    trainer = make_trainer(model, batch_size=5, epochs=2, progress=True)
    trainer.fit(torch.randn(20, 2), torch.randint(0, 2, (20,)))
    out = capsys.readouterr().out
    assert "DP-SGD epoch" in out
    assert f"{trainer.epsilon_:.3f}" in out


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"noise_multiplier": None, "target_epsilon": 0.0}, "target_epsilon"),
        ({"noise_multiplier": None, "target_epsilon": -1.0}, "target_epsilon"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"max_grad_norm": -1.0}, "max_grad_norm"),
        ({"max_grad_norm": math.nan}, "max_grad_norm"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"noise_multiplier": 1.0, "target_epsilon": 1.0}, "noise_multiplier"),
        ({"noise_multiplier": None}, "noise_multiplier"),
        ({"batch_size": 0}, "batch_size"),
        ({"epochs": 0}, "epochs"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"accountant": "basic"}, "accountant"),
        ({"noise": "numpy"}, "noise"),
        ({"engine": "opacus"}, "engine"),
        ({"loss_fn": "cross_entropy"}, "loss_fn"),
        ({"source": 42}, "source"),
    ],
)
def test_bad_parameters_raise_naming_the_argument(options: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make_trainer(torch.nn.Linear(2, 2), **options)
    assert info.value.name == name


def test_model_and_optimizer_are_checked() -> None:
    model = torch.nn.Linear(2, 2)
    with pytest.raises(InvalidParameterError, match=r"model must be a torch\.nn\.Module"):
        DPSGD(
            "not a model",  # type: ignore[arg-type]
            torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=F.cross_entropy,
            max_grad_norm=1.0,
            batch_size=2,
            noise_multiplier=1.0,
        )
    with pytest.raises(InvalidParameterError, match="optimizer"):
        make_trainer(model, optimizer=torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1))
    with pytest.raises(InvalidParameterError, match="optimizer"):
        DPSGD(
            model,
            "sgd",  # type: ignore[arg-type]
            loss_fn=F.cross_entropy,
            max_grad_norm=1.0,
            batch_size=2,
            noise_multiplier=1.0,
        )
    bn = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    with pytest.raises(UnsupportedError, match="GroupNorm"):
        make_trainer(bn)


def test_bad_data_raises() -> None:
    trainer = make_trainer(torch.nn.Linear(2, 2), batch_size=4)
    with pytest.raises(InvalidParameterError, match="batch_size"):
        trainer.fit(torch.randn(3, 2), torch.zeros(3, dtype=torch.long))
    with pytest.raises(InvalidParameterError, match="y"):
        trainer.fit(torch.randn(8, 2), torch.zeros(7, dtype=torch.long))
    bad = torch.randn(8, 2)
    bad[2, 1] = math.nan
    with pytest.raises(InvalidParameterError, match="finite"):
        trainer.fit(bad, torch.zeros(8, dtype=torch.long))
    with pytest.raises(InvalidParameterError, match="fit"):
        _ = trainer.noise_multiplier_
    assert trainer.steps_ == 0 and trainer.epsilon_ == 0.0


def test_a_registered_accountant_that_accounts_the_sampled_gaussian_is_accepted() -> None:
    from dpcurator.accounting import RDPAccountant, register_accountant

    class Renyi(RDPAccountant):
        name = "test_dpsgd_renyi"

    register_accountant("test_dpsgd_renyi", Renyi)
    trainer = make_trainer(torch.nn.Linear(2, 2), accountant="test_dpsgd_renyi")
    assert trainer.accountant == "test_dpsgd_renyi"
    with pytest.raises(InvalidParameterError, match="cannot account DP-SGD"):
        make_trainer(torch.nn.Linear(2, 2), accountant="zcdp")  # asked, and it cannot
