"""The public surface of dpcurator.noise (src/dpcurator/noise/__init__.py)."""

from __future__ import annotations

from dpcurator import noise

DOCUMENTED = [
    "ENCODING_KINDS",
    "FixedPointEncoding",
    "FixedPointRange",
    "InsecureSeededSource",
    "MAX_ENCODING_BITS",
    "MAX_MAGNITUDE",
    "MIN_WIDTH",
    "RandomSource",
    "SecureRandomSource",
    "bernoulli",
    "bernoulli_exp",
    "default_source",
    "discrete_gaussian",
    "discrete_laplace",
    "dlap_tail_bounds",
    "floor_log2",
    "from_grid",
    "grid_exponent",
    "pow2",
    "resolve_source",
    "secret_bytes",
    "to_grid",
    "uniform_integers",
]


def test_all_is_the_documented_api() -> None:
    assert sorted(noise.__all__) == DOCUMENTED
    for name in DOCUMENTED:
        assert getattr(noise, name).__doc__, name


def test_module_docstring_states_the_security_model() -> None:
    doc = noise.__doc__ or ""
    for phrase in ("CSPRNG", "Exactness", "timing side channels", "InsecureSeededSource"):
        assert phrase in doc
