"""The API reference lists every public name of every public package (docs/gen/api.py)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import sys
from pathlib import Path

import griffe
import pytest

import dpcurator

GEN = Path(__file__).resolve().parents[2] / "docs" / "gen"
sys.path.insert(0, str(GEN))

import api  # noqa: E402
import hooks  # noqa: E402
import sphinx_roles  # noqa: E402


@pytest.fixture(scope="module")
def pages() -> list[api.ApiPage]:
    return api.api_pages()


def test_every_public_package_has_a_page_or_is_excluded(pages: list[api.ApiPage]) -> None:
    public = {
        f"dpcurator.{info.name}"
        for info in pkgutil.iter_modules(dpcurator.__path__)
        if not info.name.startswith("_")
    } | {"dpcurator"}
    documented = {page.package for page in pages}
    assert documented | set(api.EXCLUDED) == public
    assert not documented & set(api.EXCLUDED)
    for why in api.EXCLUDED.values():
        assert why.strip(), "each excluded package says why"


def test_every_name_of_all_is_on_its_page(pages: list[api.ApiPage]) -> None:
    for page in pages:
        exported = importlib.import_module(page.package).__all__
        assert page.names == tuple(exported)
        markdown = page.markdown()
        for identifier in page.identifiers:
            assert f"\n::: {identifier}\n" in markdown
        assert len(page.identifiers) == len(exported)


def test_names_imported_on_first_use_point_at_their_definition(pages: list[api.ApiPage]) -> None:
    by_package = {page.package: page for page in pages}
    learn = by_package["dpcurator.learn"]
    identifiers = dict(zip(learn.names, learn.identifiers, strict=True))
    assert identifiers["DPLogisticRegression"] == "dpcurator.learn.DPLogisticRegression"
    assert identifiers["DPSGD"] == "dpcurator.learn._dpsgd.DPSGD"


def test_constants_imported_on_first_use_point_at_their_module() -> None:
    static = griffe.load("dpcurator", search_paths=[str(api.SRC)], allow_inspection=False)
    learn = static["learn"]
    assert "_distributed" in learn.modules  # TRUST_MODELS lives there, exported lazily
    assert api._defined_in(learn, "TRUST_MODELS") == "dpcurator.learn._distributed.TRUST_MODELS"
    assert api._defined_in(learn, "no_such_name") is None


def test_navigation_and_index_list_every_page(pages: list[api.ApiPage]) -> None:
    summary, index = api.summary(pages), api.index(pages)
    for page in pages:
        assert f"]({page.package}.md)" in summary
        assert f"[`{page.package}`]({page.package}.md)" in index


def test_the_build_fails_when_a_name_has_no_entry(tmp_path: Path) -> None:
    page = api.ApiPage("dpcurator.errors", ("DPError", "QueryError"), ("a.DPError", "a.QueryError"))
    html = tmp_path / "api" / "dpcurator.errors" / "index.html"
    html.parent.mkdir(parents=True)
    html.write_text('<h2 id="a.DPError">DPError</h2>', encoding="utf-8")
    assert hooks.missing_entries(tmp_path, [page]) == ["dpcurator.errors.QueryError"]
    with pytest.raises(RuntimeError, match=r"\d+ public names have no entry"):
        hooks.on_post_build({"site_dir": str(tmp_path / "elsewhere")})  # no pages built at all


def test_sphinx_roles_become_markdown() -> None:
    assert doctest.testmod(sphinx_roles).failed == 0
    text = ":func:`dpcurator.noise.to_grid` and :class:`~dpcurator.accounting.Budget`"
    assert sphinx_roles.convert(text) == "`dpcurator.noise.to_grid` and `Budget`"
