"""The API reference, generated from the packages' ``__all__`` at build time.

Every public package of ``dpcurator`` (a subpackage or module whose name does not start with an
underscore) gets one page listing every name of its ``__all__``; a package that appears later
gets its page without any edit here. ``hooks.py`` checks after the build that the site holds an
entry for every name, and ``tests/docs/test_api_reference.py`` checks the pages against
``__all__`` without building.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import griffe

import dpcurator

SRC = Path(__file__).resolve().parents[2] / "src"

# Packages left out of the API reference because their docstrings do not yet build under
# `mkdocs build --strict`. Each entry says why; remove it when the package's docstrings build.
EXCLUDED: dict[str, str] = {}

# Packages whose __all__ documents the command line rather than Python names worth a page.
TITLES: dict[str, str] = {
    "dpcurator": "dpcurator (top level)",
}


@dataclass(frozen=True)
class ApiPage:
    """One page of the API reference: a package and the names it exports.

    ``identifiers`` holds, for each name, the path mkdocstrings documents it under: the public
    path (``dpcurator.curator.Session``) when the package imports the name where a static reader
    sees it, else (names a package imports on first use in a module ``__getattr__``) the path of
    its definition (``dpcurator.learn._dpsgd.DPSGD``), shown under its public name.
    """

    package: str
    names: tuple[str, ...]
    identifiers: tuple[str, ...]

    @property
    def path(self) -> str:
        """The page's path under ``docs/`` (``api/dpcurator.curator.md``)."""
        return f"api/{self.package}.md"

    def markdown(self) -> str:
        """Return the page's Markdown: the package's docstring, then an entry per public name."""
        title = TITLES.get(self.package, self.package)
        lines = [
            f"# {title}",
            "",
            f"::: {self.package}",
            "    options:",
            "      members: false",
            "      show_root_heading: false",
            "      show_root_toc_entry: false",
            "",
            f"Public names ({len(self.names)}), as listed in `{self.package}.__all__`.",
            "",
        ]
        for identifier in self.identifiers:
            lines += [f"::: {identifier}", ""]
        return "\n".join(lines)


def public_packages() -> list[str]:
    """Return every public package and module of dpcurator, sorted, the top level first."""
    found = [
        f"dpcurator.{info.name}"
        for info in pkgutil.iter_modules(dpcurator.__path__)
        if not info.name.startswith("_")
    ]
    return ["dpcurator", *sorted(found)]


def _import(package: str) -> ModuleType:
    """Import a package as the tests do (typer < 0.21, which flwr pins, warns inside click)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"'click\.utils\..*' is deprecated", DeprecationWarning)
        return importlib.import_module(package)


def _defined_in(static: griffe.Object | griffe.Alias, name: str) -> str | None:
    """Return where ``name`` is assigned in a module under ``static`` (None if nowhere)."""
    for module in static.modules.values():
        member = module.members.get(name)
        if member is not None and not member.is_alias:
            return f"{module.path}.{name}"
        found = _defined_in(module, name)
        if found is not None:
            return found
    return None


def _identifier(package: str, name: str, static: griffe.Object | griffe.Alias) -> str:
    """Where mkdocstrings finds ``package.name``: see :class:`ApiPage`."""
    if name in static.members:
        return f"{package}.{name}"
    value = getattr(_import(package), name)
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):  # a class or a function
        return f"{module}.{qualname}"
    defined = _defined_in(static, name)  # a constant: the module that assigns it
    if defined is None:
        raise RuntimeError(f"{package}.{name} cannot be found for the API reference")
    return defined


def api_pages() -> list[ApiPage]:
    """Return the pages of the API reference: one per public package not in ``EXCLUDED``."""
    root = griffe.load("dpcurator", search_paths=[str(SRC)], allow_inspection=False)
    pages = []
    for package in public_packages():
        if package in EXCLUDED:
            continue
        module = _import(package)
        exported = getattr(module, "__all__", None)
        if not exported:
            raise RuntimeError(f"{package} has no __all__: the API reference cannot list it")
        static = root if package == "dpcurator" else root[package.removeprefix("dpcurator.")]
        identifiers = tuple(_identifier(package, name, static) for name in exported)
        pages.append(ApiPage(package, tuple(exported), identifiers))
    return pages


def summary(pages: list[ApiPage]) -> str:
    """Return the API section's navigation (``api/SUMMARY.md``, for mkdocs-literate-nav)."""
    lines = ["* [Overview](index.md)"]
    lines += [f"* [{page.package}]({Path(page.path).name})" for page in pages]
    return "\n".join(lines) + "\n"


def index(pages: list[ApiPage]) -> str:
    """Return the API section's first page: every package and how many names it exports."""
    lines = [
        "# API reference",
        "",
        "Every public name of every package, generated from the packages' `__all__` when the",
        "site is built. Names outside `__all__` (and modules whose names start with an",
        "underscore) are private and may change without notice.",
        "",
        "| package | public names |",
        "| --- | --- |",
    ]
    lines += [
        f"| [`{page.package}`]({Path(page.path).name}) | {len(page.names)} |" for page in pages
    ]
    if EXCLUDED:
        lines += ["", "Not yet in the reference (their docstrings do not build yet):", ""]
        lines += [f"- `{package}`: {why}" for package, why in sorted(EXCLUDED.items())]
    return "\n".join(lines) + "\n"
