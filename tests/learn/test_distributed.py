"""Distributed DP: discrete Gaussian shares, the masked modular sum, DDG accounting, DP-FedAvg."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cryptography")
stats = pytest.importorskip("scipy.stats")

from dpcurator.accounting import (  # noqa: E402
    ComposedEvent,
    DiscreteGaussianEvent,
    PLDAccountant,
    ZCDPAccountant,
    event_rho,
    make_accountant,
)
from dpcurator.errors import InvalidParameterError  # noqa: E402
from dpcurator.learn._distributed import (  # noqa: E402
    MaskingKey,
    ddg_event,
    ddg_rho,
    ddg_tau,
    from_ring,
    noisy_share,
    quantize_update,
    ring_bits,
    secure_sum,
    share_sigma,
    to_ring,
    unmask_sum,
)
from dpcurator.learn._federated import DPFedAvg  # noqa: E402
from dpcurator.learn._torch_noise import clipped_grid_sum, grid_bits, grid_sensitivity  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402


def discrete_gaussian_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2.0 * sigma * sigma))
    pmf: np.ndarray = weights / weights.sum()
    return pmf


def sum_pmf(sigma: float, shares: int, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact pmf of a sum of ``shares`` iid N_Z(0, sigma^2) (convolution, tails < 1e-80)."""
    support = np.arange(-half_width, half_width + 1)
    one = discrete_gaussian_pmf(sigma, support)
    total = one
    for _ in range(shares - 1):
        total = np.convolve(total, one)
    values = np.arange(-half_width * shares, half_width * shares + 1)
    return values, total


def chi_square(samples: np.ndarray, values: np.ndarray, pmf: np.ndarray) -> tuple[float, int]:
    """Pearson's statistic with the tails pooled so that every cell expects at least 5."""
    n = samples.size
    counts = np.zeros(values.size)
    index, number = np.unique(samples - values[0], return_counts=True)
    inside = (index >= 0) & (index < values.size)
    counts[index[inside]] = number[inside]
    expected = pmf * n
    keep = np.flatnonzero(expected >= 5)
    lo, hi = keep[0], keep[-1]
    cells_obs = [counts[: lo + 1].sum(), *counts[lo + 1 : hi], counts[hi:].sum()]
    cells_exp = [expected[: lo + 1].sum(), *expected[lo + 1 : hi], expected[hi:].sum()]
    obs, exp = np.array(cells_obs), np.array(cells_exp)
    return float(((obs - exp) ** 2 / exp).sum()), obs.size - 1


# -- the noise ----------------------------------------------------------------------------------
@pytest.mark.statistical
def test_the_securely_summed_shares_have_the_convolved_discrete_gaussian_law() -> None:
    # n clients with zero updates: the server's unmasked sum is pure noise, sum_i Z_i with
    # Z_i ~ N_Z(0, s^2); its law is the n-fold convolution (not a discrete Gaussian). Chi-square
    # at level 1e-6 (the critical value from the chi-square law with the cells' dof).
    n, s, d = 5, 1.5, 20000
    source = InsecureSeededSource(2024)
    shares = {
        i: noisy_share(np.zeros(d), clip_norm=1.0, bits=4, sigma=s, source=source)
        for i in range(1, n + 2)
    }
    total = secure_sum(shares, ring_bits=16, dropped=[n + 1], round=3)  # one dropout
    values, pmf = sum_pmf(s, n, 40)
    statistic, dof = chi_square(total, values, pmf)
    critical = float(stats.chi2.ppf(1 - 1e-6, dof))
    assert statistic < critical
    # The variance is n times the share's (exact, from the pmf), within 6 standard errors.
    variance = float((values**2 * pmf).sum())
    fourth = float((values**4 * pmf).sum())
    assert abs(total.var() - variance) < 6 * math.sqrt((fourth - variance**2) / d)
    # Negative controls: the law of n - 1 shares (the dropped client's share counted out of
    # the noise: exactly the mistake an accountant must not make), and of n + 1 shares.
    for wrong in (n - 1, n + 1):
        v, p = sum_pmf(s, wrong, 40)
        bad, bad_dof = chi_square(total, v, p)
        assert bad > float(stats.chi2.ppf(1 - 1e-6, bad_dof))


def test_ddg_rho_is_the_central_discrete_gaussian_for_one_share_and_bounds_tau() -> None:
    # n = 1: tau = 0 and rho = Delta^2 / (2 sigma^2), the discrete Gaussian's (CKS20).
    assert ddg_rho(sigma=3.0, sensitivity=2.0, shares=1, dimension=7) == pytest.approx(
        event_rho(DiscreteGaussianEvent(sigma=3.0, sensitivity=2.0)), rel=1e-12
    )
    # tau = 10 (exp(-pi^2) + exp(-4 pi^2 / 3)) for sigma = 1, n = 3 (KLS21, Theorem 1).
    tau = 10 * (math.exp(-(math.pi**2)) + math.exp(-4 * math.pi**2 / 3))
    assert ddg_tau(1.0, 3) >= tau
    assert ddg_tau(1.0, 3) == pytest.approx(tau, rel=1e-9)
    # rho = (Delta / (sqrt(n) sigma) + tau sqrt(d))^2 / 2, rounded up.
    rho = ddg_rho(sigma=1.0, sensitivity=2.0, shares=3, dimension=16)
    expected = 0.5 * (2.0 / math.sqrt(3) + tau * 4.0) ** 2
    assert rho >= expected
    assert rho == pytest.approx(expected, rel=1e-9)
    # At training noise levels (thousands of grid units) tau vanishes: the sum of n shares
    # is accounted exactly like one central discrete Gaussian of variance n sigma^2.
    assert ddg_tau(2000.0, 100) == 0.0
    central = event_rho(DiscreteGaussianEvent(sigma=2000.0 * 10, sensitivity=5000.0))
    assert ddg_rho(sigma=2000.0, sensitivity=5000.0, shares=100, dimension=10**6) == (
        pytest.approx(central, rel=1e-12)
    )
    with pytest.raises(InvalidParameterError, match="grid unit"):
        ddg_rho(sigma=0.25, sensitivity=1.0, shares=2, dimension=1)


def test_share_sigma_is_exact_and_ring_bits_leave_room() -> None:
    for sigma, n in ((1000.0, 7), (3.3, 3), (2.0**20, 100)):
        s = share_sigma(sigma, n)
        from fractions import Fraction

        assert n * Fraction(s) ** 2 >= Fraction(sigma) ** 2
        assert n * Fraction(math.nextafter(s, 0.0)) ** 2 < Fraction(sigma) ** 2
    bits = ring_bits(sensitivity=1e6, sigma=1e6, shares=50, dimension=1000)
    assert 2 ** (bits - 1) > 50 * 1e6 + 1e6 * math.sqrt(2 * 50 * math.log(2 * 1000 * 2**40))
    with pytest.raises(InvalidParameterError, match="coarser grid"):
        ring_bits(sensitivity=2.0**60, sigma=1.0, shares=8, dimension=1)


def test_client_quantisation_matches_the_server_grid_and_its_sensitivity() -> None:
    generator = np.random.default_rng(5)
    d, clip = 300, 0.7
    bits = grid_bits(clip, d)
    bound = grid_sensitivity(clip, d, bits)
    for scale in (1e-3, 0.1, 10.0, 1e6):
        u = generator.normal(size=d) * scale
        mine = quantize_update(u, clip_norm=clip, bits=bits)
        server = clipped_grid_sum(torch.from_numpy(u[None, :]), clip_norm=clip, bits=bits)
        assert np.array_equal(mine, server.numpy().astype(np.int64))
        assert float(np.linalg.norm(mine)) <= bound
    assert not quantize_update([math.nan, 1.0], clip_norm=1.0, bits=3).any()


# -- the masked modular sum ---------------------------------------------------------------------
def test_masks_cancel_to_the_survivors_sum_and_hide_each_share() -> None:
    generator = np.random.default_rng(0)
    shares = {i: generator.integers(-(2**20), 2**20, size=64) for i in (3, 5, 8, 13, 21)}
    for dropped in ([], [8], [3, 21]):
        total = secure_sum(shares, ring_bits=32, dropped=dropped, round=7)
        expected = sum(v for i, v in shares.items() if i not in dropped)
        assert np.array_equal(total, expected)
    # What the server holds of one client is uniform-looking and not its share; without the
    # survivors' corrections the dropped client's masks do not cancel (negative control).
    keys = {i: MaskingKey() for i in shares}
    public = {i: k.public_bytes for i, k in keys.items()}
    masked = {i: keys[i].mask(v, own=i, peers=public, round=1, bits=32) for i, v in shares.items()}
    assert not np.array_equal(from_ring(masked[3], 32), shares[3])
    survivors = [i for i in shares if i != 8]
    wrong = unmask_sum([masked[i] for i in survivors], [], bits=32)
    assert not np.array_equal(wrong, sum(shares[i] for i in survivors))
    fixes = [
        keys[i].correction(own=i, dropped={8: public[8]}, round=1, dimension=64, bits=32)
        for i in survivors
    ]
    right = unmask_sum([masked[i] for i in survivors], fixes, bits=32)
    assert np.array_equal(right, sum(shares[i] for i in survivors))
    # Masks differ between rounds (a replayed mask would leak the difference of two shares).
    other = keys[3].mask(shares[3], own=3, peers=public, round=2, bits=32)
    assert not np.array_equal(other, masked[3])


def test_ring_round_trip_and_bad_input() -> None:
    x = np.array([-(2**30), -1, 0, 1, 2**30 - 1])
    assert np.array_equal(from_ring(to_ring(x, 31), 31), x)
    with pytest.raises(InvalidParameterError, match="ring_bits"):
        to_ring(x, 63)
    with pytest.raises(InvalidParameterError, match="not all"):
        secure_sum({1: [1], 2: [2]}, ring_bits=8, dropped=[1, 2])
    with pytest.raises(InvalidParameterError, match="32 bytes"):
        MaskingKey(b"short")


# -- DP-FedAvg: one parameter chooses the trust model --------------------------------------------
def federation(count: int = 12, seed: int = 0) -> list[tuple[Any, Any]]:
    generator = torch.Generator().manual_seed(seed)
    clients = []
    for _ in range(count):
        X = torch.randn(25, 2, generator=generator)
        clients.append((X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()))
    return clients


def trainer(mode: str, **options: object) -> DPFedAvg:
    settings: dict[str, object] = {
        "rounds": 4,
        "clients_per_round": 12,
        "clip_norm": 1.0,
        "noise_multiplier": 0.3,
        "local_lr": 0.5,
        "source": InsecureSeededSource(11),
        "progress": False,
    }
    settings.update(options)
    return DPFedAvg(
        torch.nn.Linear(2, 2),
        loss_fn=torch.nn.functional.cross_entropy,
        mode=mode,
        **settings,  # type: ignore[arg-type]
    )


def test_the_mode_parameter_picks_the_trust_model_and_all_three_learn() -> None:
    clients = federation()
    X = torch.cat([x for x, _ in clients])
    y = torch.cat([t for _, t in clients])
    accuracy = {}
    for mode in ("central", "local", "distributed"):
        fed = trainer(mode).fit(clients)
        with torch.no_grad():
            accuracy[mode] = float((fed.model(X).argmax(1) == y).float().mean())
        assert [r.round for r in fed.history_] == [1, 2, 3, 4]
    assert accuracy["central"] > 0.85 and accuracy["distributed"] > 0.85
    with pytest.raises(InvalidParameterError, match="mode"):
        trainer("shuffled")


def test_distributed_epsilon_per_round_equals_the_accountant_on_the_ddg_events() -> None:
    fed = trainer("distributed", accountant="pld").fit(federation())
    d, delta = fed.dimension_, fed.delta
    share = share_sigma(fed.sigma_, 12)  # q = 1: all 12 clients every round, no dropout
    event = ddg_event(sigma=share, sensitivity=fed.sensitivity_, shares=12, dimension=d)
    assert event.rho == pytest.approx(1 / (2 * 0.3**2), rel=1e-6)  # z = 0.3: 1 / (2 z^2)
    for t, record in enumerate(fed.history_, start=1):
        assert record.clients == 12
        expected = ZCDPAccountant().compose(event, t).get_epsilon(delta)
        assert record.epsilon == expected
    assert isinstance(fed.privacy_event_, ComposedEvent)
    assert make_accountant("zcdp").compose(fed.privacy_event_).get_epsilon(delta) == fed.epsilon_
    # Target epsilon: calibrated so that T worst-case rounds spend at most it.
    calibrated = trainer("distributed", noise_multiplier=None, target_epsilon=3.0).fit(federation())
    assert 2.99 < calibrated.epsilon_ <= 3.0


def test_distributed_dropouts_are_charged_nothing_and_the_round_survives_or_is_abandoned() -> None:
    # 30% of the sampled clients drop out after the key exchange; with a 50% tolerance every
    # round is released and the survivors' shares carry noise of variance >= sigma^2.
    fed = trainer("distributed", simulated_dropout=0.3, dropout_tolerance=0.5).fit(federation())
    counts = [r.clients for r in fed.history_]
    assert all(6 <= c < 12 for c in counts)  # some dropped in every round (seeded)
    # Per round the event is the DDG bound for the shares summed; every survivor is charged,
    # every dropped client is not: the worst client's epsilon is that of its own rounds.
    event = fed.privacy_event_
    assert isinstance(event, ComposedEvent) and 1 <= len(event.events) <= 4
    for sub in event.events:
        assert event_rho(sub) <= 1 / (2 * 0.3**2) * (1 + 1e-9)  # never less noise than sigma
    # Without tolerance a dropout abandons the round: nothing released, nothing spent.
    strict = trainer("distributed", simulated_dropout=0.3, dropout_tolerance=0.0, rounds=2)
    before = [p.detach().clone() for p in strict.model.parameters()]
    strict.fit(federation())
    assert [r.clients for r in strict.history_] == [0, 0] and strict.epsilon_ == 0.0
    after = list(strict.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_local_mode_is_unchanged_and_accounted_with_pld() -> None:
    fed = trainer("local", rounds=2).fit(federation())
    assert fed.sensitivity_ == pytest.approx(2 * grid_sensitivity(1.0, 6, fed.grid_bits_))
    expected = PLDAccountant().compose(fed._round_event(), 2).get_epsilon(fed.delta)
    assert fed.epsilon_ == pytest.approx(expected, rel=1e-12)
