"""The public API of dpcurator.networks: complete, importable, documented."""

from __future__ import annotations

from dpcurator import networks


def test_all_is_complete_and_documented() -> None:
    exported = networks.__all__
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(networks, name), name
        value = getattr(networks, name)
        if callable(value):
            assert value.__doc__, f"{name} has no docstring"
    assert networks.__doc__ and "API map" in networks.__doc__
