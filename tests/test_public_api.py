"""Each package's ``__init__`` lists its public API, and every listed name exists."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "dpcurator",
    "dpcurator.noise",
    "dpcurator.accounting",
    "dpcurator.mechanisms",
    "dpcurator.cli",
    "dpcurator.local",
    "dpcurator.datasets",
    "dpcurator.examples",
    "dpcurator.curator",
    "dpcurator.hierarchy",
    "dpcurator.attacks",
    "dpcurator.audit",
    "dpcurator.learn",
    "dpcurator.service",
    "dpcurator.client",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_complete_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported, f"{name}.__all__ is empty"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr}, which does not exist"
    assert module.__doc__, f"{name} has no module docstring mapping its API"


def test_errors_form_one_hierarchy() -> None:
    import dpcurator

    for name in ("InvalidParameterError", "UnsupportedError", "BudgetExceededError"):
        assert issubclass(getattr(dpcurator, name), dpcurator.DPError)
    assert issubclass(dpcurator.InvalidParameterError, ValueError)
