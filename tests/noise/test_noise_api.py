"""The public surface of dpcurator.noise (src/dpcurator/noise/__init__.py)."""

from __future__ import annotations

from dpcurator import noise

DOCUMENTED = [
    "InsecureSeededSource",
    "RandomSource",
    "SecureRandomSource",
    "bernoulli",
    "bernoulli_exp",
    "default_source",
    "discrete_gaussian",
    "discrete_laplace",
    "from_grid",
    "resolve_source",
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
