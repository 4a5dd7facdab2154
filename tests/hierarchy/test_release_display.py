"""How a hierarchical release shows itself: a short repr, and HTML without the true counts."""

from __future__ import annotations

from dpcurator.hierarchy import HierarchicalRelease, HierarchySpec, release_hierarchy
from dpcurator.noise import InsecureSeededSource


def _release() -> HierarchicalRelease:
    spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1.0)
    return release_hierarchy(spec, source=InsecureSeededSource(0))


def test_repr_is_short() -> None:
    release = _release()
    text = repr(release)
    assert text == (
        "HierarchicalRelease(name='hierarchy', levels=('total', 'state'), nodes=6, "
        "epsilon=1.0, methods=('exact',))"
    )


def test_html_shows_the_public_table_and_never_the_truth() -> None:
    release = _release()
    page = release._repr_html_()
    assert "<th>noisy</th><th>std</th><th>exact</th>" in page
    assert page.count("<tr>") == 1 + 6
    assert "truth" not in page
    for noisy in release.noisy:
        assert f"<td>{int(noisy):,}</td>" in page
    assert "ε=1 (geometric noise per level, pure DP)" in page
