"""choose_protocol: GRR below d = 3 e^eps + 2, OUE or OLH above; Var* of every protocol."""

from __future__ import annotations

import math

import pytest

from dpcurator.errors import InvalidParameterError
from dpcurator.local._choose import approximate_variances, choose_protocol
from dpcurator.local._grr import GeneralizedRandomizedResponse
from dpcurator.local._hadamard import HadamardResponse
from dpcurator.local._olh import OptimizedLocalHashing
from dpcurator.local._unary import OptimizedUnaryEncoding, SymmetricUnaryEncoding


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 3.0])
def test_boundary_is_three_e_eps_plus_two(eps: float) -> None:
    boundary = 3 * math.exp(eps) + 2
    below = math.floor(boundary)  # boundary is never an integer here
    assert below < boundary < below + 1
    assert isinstance(choose_protocol(eps, below), GeneralizedRandomizedResponse)
    assert isinstance(choose_protocol(eps, 2), GeneralizedRandomizedResponse)
    above = choose_protocol(eps, below + 1)
    assert type(above) is OptimizedUnaryEncoding
    comm = choose_protocol(eps, below + 1, prefer="communication")
    assert type(comm) is OptimizedLocalHashing
    assert comm.g == round(math.exp(eps) + 1)
    # at the boundary the two variances cross: GRR's is below OUE's just under it, above after
    v_below = approximate_variances(eps, below)
    v_above = approximate_variances(eps, below + 1)
    assert v_below["grr"] < v_below["oue"]
    assert v_above["grr"] > v_above["oue"]


@pytest.mark.parametrize("eps", [0.25, 1.0, 4.0])
@pytest.mark.parametrize("d", [2, 5, 12, 40, 500])
def test_choice_has_the_lowest_variance(eps: float, d: int) -> None:
    variances = approximate_variances(eps, d)
    chosen = choose_protocol(eps, d)
    assert chosen.variance(1)[0] <= min(variances.values()) * (1 + 1e-9)
    olh = choose_protocol(eps, d, prefer="communication")
    # OLH's integer g costs at most a small fraction over the optimum (or it is GRR anyway)
    assert olh.variance(1)[0] <= min(variances.values()) * 1.1


def test_approximate_variances_match_the_protocols() -> None:
    eps, d = 1.3, 20
    v = approximate_variances(eps, d)
    protocols = {
        "grr": GeneralizedRandomizedResponse(eps, d),
        "sue": SymmetricUnaryEncoding(eps, d),
        "oue": OptimizedUnaryEncoding(eps, d),
        "olh": OptimizedLocalHashing(eps, d),
        "blh": OptimizedLocalHashing(eps, d, g=2),
        "hadamard": HadamardResponse(eps, d),
    }
    assert set(v) == set(protocols)
    for name, protocol in protocols.items():
        assert protocol.variance(1)[0] == pytest.approx(v[name], rel=1e-7), name


def test_bad_parameters() -> None:
    with pytest.raises(InvalidParameterError) as info:
        choose_protocol(1.0, 10, prefer="speed")  # type: ignore[arg-type]
    assert info.value.name == "prefer"
    with pytest.raises(InvalidParameterError) as info:
        choose_protocol(0.0, 10)
    assert info.value.name == "epsilon"
    with pytest.raises(InvalidParameterError) as info:
        choose_protocol(1.0, 1)
    assert info.value.name == "domain_size"
    with pytest.raises(InvalidParameterError) as info:
        approximate_variances(1.0, 0)
    assert info.value.name == "domain_size"
